"""Map output: one data file and one index file per map attempt, on its node's shuffle directory.

The data file holds the map's framed blocks in reduce order; the index holds R+1 offsets. The
index is written last, through a temporary name and a rename, so an index that exists always
describes a complete data file (Spark's `writeMetadataFileAndCommit` does the same).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import CorruptShuffleData
from ..store import Store
from .blocks import Pieces, frame_pieces
from .files import decode_offsets, encode_offsets, map_output


@dataclass(frozen=True)
class MapStatus:
    """What the driver learns from a finished map attempt: where its output is and how big each
    block is (framed bytes; 0 for an empty block)."""

    map_index: int
    attempt: int
    location: str  # host:port of the shuffle service that serves the output
    sizes: tuple[int, ...]
    pushed_blocks: int = 0

    @property
    def total_size(self) -> int:
        return sum(self.sizes)


def write_map_output(
    store: Store,
    app: str,
    shuffle_id: int,
    map_index: int,
    attempt: int,
    payloads: Sequence[bytes | memoryview],
    keep: list[Pieces] | None = None,
) -> list[int]:
    """Write one map attempt's blocks (one payload per reduce partition); returns the offsets.
    With `keep`, the framed blocks (header and payload, the payload not copied) are also left
    there, for pushing them from memory."""
    data_path, index_path = map_output(app, shuffle_id, map_index, attempt)
    offsets = [0]
    with store.open_write(data_path) as out:
        for reduce_id, payload in enumerate(payloads):
            header, body = pieces = frame_pieces(map_index, reduce_id, payload)
            out.write(header)
            out.write(body)
            offsets.append(offsets[-1] + len(header) + len(body))
            if keep is not None:
                keep.append(pieces)
    tmp = index_path + ".tmp"
    store.write_bytes(tmp, encode_offsets(offsets))
    store.delete(index_path)  # a rerun of the same attempt number replaces its output
    store.rename(tmp, index_path)
    return offsets


def read_offsets(
    store: Store, app: str, shuffle_id: int, map_index: int, attempt: int
) -> list[int]:
    _, index_path = map_output(app, shuffle_id, map_index, attempt)
    offsets = decode_offsets(store.read_bytes(index_path), index_path)
    return offsets


def block_sizes(offsets: list[int]) -> tuple[int, ...]:
    """Framed size of each block from an index's offsets."""
    return tuple(b - a for a, b in itertools.pairwise(offsets))


def block_range(offsets: list[int], start: int, end: int, where: str = "") -> tuple[int, int]:
    """(offset, length) in the data file of reduce partitions [start, end)."""
    if not 0 <= start <= end <= len(offsets) - 1:
        raise CorruptShuffleData(
            f"{where}: reduce range [{start}, {end}) outside 0..{len(offsets) - 1}"
        )
    return offsets[start], offsets[end] - offsets[start]
