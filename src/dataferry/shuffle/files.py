"""Where the shuffle's files live in a node's shuffle directory, and the index format.

    <app>/shuffle_<s>/shuffle_<s>_<map>_<attempt>.data|.index        map outputs
    <app>/shuffle_<s>/merged/shuffleMerged_<app>_<s>_<mergeId>_<reduce>.data|.index|.meta

The names follow Spark's (`shuffle_{shuffleId}_{mapId}_0.data`, `shuffleMerged_{appId}_...`).
An index file is a run of big-endian u64 offsets starting at 0: a map output's has one entry
per reduce partition plus one, a merged partition's one per chunk plus one. Keeping a shuffle
under one directory means removing a shuffle is one recursive delete (no pile-up, SPARK-40480).
"""

from __future__ import annotations

import functools
import itertools
import re
import struct

from ..errors import ConfigError, CorruptShuffleData
from ..store import paths

_SAFE = re.compile(r"[A-Za-z0-9_.-]{1,128}")  # whole name: no newline, no separator


def check_app(app: str) -> str:
    """Application ids become directory names: refuse anything that could escape."""
    if not isinstance(app, str) or not _SAFE.fullmatch(app) or app in {".", ".."}:
        raise ConfigError(f"shuffle app id {app!r} must match {_SAFE.pattern}")
    return app


def shuffle_dir(app: str, shuffle_id: int) -> str:
    return paths.join(check_app(app), f"shuffle_{int(shuffle_id)}")


@functools.lru_cache(maxsize=1 << 14)
def map_output(app: str, shuffle_id: int, map_index: int, attempt: int) -> tuple[str, str]:
    """(data, index) paths of one map attempt's output (remembered: a reducer names each
    map output of a shuffle once, every reducer of a process the same ones)."""
    base = paths.join(shuffle_dir(app, shuffle_id), f"shuffle_{shuffle_id}_{map_index}_{attempt}")
    return base + ".data", base + ".index"


def merged_files(app: str, shuffle_id: int, merge_id: int, reduce_id: int) -> tuple[str, str, str]:
    """(data, index, meta) paths of one merged reduce partition."""
    name = f"shuffleMerged_{app}_{shuffle_id}_{merge_id}_{reduce_id}"
    base = paths.join(shuffle_dir(app, shuffle_id), "merged", name)
    return base + ".data", base + ".index", base + ".meta"


def encode_offsets(offsets: list[int]) -> bytes:
    return struct.pack(f">{len(offsets)}Q", *offsets)


def decode_offsets(data: bytes, where: str = "") -> list[int]:
    if len(data) % 8 or not data:
        raise CorruptShuffleData(f"{where}: index of {len(data)} bytes is not a run of u64 offsets")
    offsets = list(struct.unpack(f">{len(data) // 8}Q", data))
    if offsets[0] != 0 or any(b < a for a, b in itertools.pairwise(offsets)):
        raise CorruptShuffleData(f"{where}: index offsets must start at 0 and never decrease")
    return offsets
