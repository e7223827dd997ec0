"""A staging task commit: the attempt's local files go up as multipart uploads left pending.

    record_keys -> start_uploads -> record_uploads -> upload_parts -> save_pendingset

Each stage takes what the one before produced. The attempt's uploads record names every key
before an upload starts and every upload id before a part is sent, so whatever an attempt that
dies anywhere here leaves pending can be found and aborted. Parts are read from the local file
by range, so memory stays at about `upload_threads` parts whatever the file sizes.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from ....stages import TASK_LEVEL, stage
from ....store import Store
from ...protocol import StageContext
from ..magic.files import PendingSet
from .records import UploadsRecord

MAX_PARTS = 10_000  # S3's most parts per upload


@dataclass(frozen=True)
class LocalFile:
    key: str  # store-relative destination path (= its path below the local staging directory)
    size: int


@dataclass(frozen=True)
class Part:
    key: str
    number: int  # 1-based, as S3 numbers parts
    offset: int
    length: int


def parts_of(f: LocalFile, part_size: int) -> list[Part]:
    """A file's parts in order, `part_size` bytes each but the last (larger if the file would
    need more than S3's 10,000 parts); an empty file is one empty part."""
    part_size = max(part_size, math.ceil(f.size / MAX_PARTS))
    count = max(1, math.ceil(f.size / part_size))
    return [
        Part(f.key, i + 1, i * part_size, min(part_size, f.size - i * part_size))
        for i in range(count)
    ]


@stage("task_stage_record_keys", "record_keys", level=TASK_LEVEL)
def record_keys(
    ctx: StageContext, record_path: str, record: UploadsRecord, files: list[LocalFile]
) -> UploadsRecord:
    """Name every key the attempt will upload, before the first upload starts."""
    record.keys = [f.key for f in files]
    ctx.store.write_bytes(record_path, record.to_bytes())
    return record


@stage("task_stage_start_uploads", "start_uploads", level=TASK_LEVEL)
def start_uploads(
    ctx: StageContext, files: list[LocalFile], started: dict[str, str]
) -> dict[str, str]:
    """Start one multipart upload per file, in parallel, into `started` (key -> upload id;
    the caller keeps it, so uploads started before a failure can be aborted)."""
    lock = threading.Lock()

    def start(f: LocalFile) -> None:
        upload_id = ctx.store.initiate_upload(f.key)
        with lock:
            started[f.key] = upload_id

    try:
        ctx.pool.for_each(start, files)
    finally:
        ctx.stats.incr("committer_uploads_started", len(started))
    return started


@stage("task_stage_record_uploads", "record_uploads", level=TASK_LEVEL)
def record_uploads(
    ctx: StageContext, record_path: str, record: UploadsRecord, started: dict[str, str]
) -> UploadsRecord:
    """Name every upload id before a byte is sent."""
    record.uploads = dict(started)
    ctx.store.write_bytes(record_path, record.to_bytes())
    return record


@stage("task_stage_upload_parts", "upload_parts", level=TASK_LEVEL)
def upload_parts(
    ctx: StageContext,
    local: Store,
    files: list[LocalFile],
    started: dict[str, str],
    part_size: int,
) -> dict[str, list[str]]:
    """Send every part of every file, parts of all files in one bounded pool: key -> the part
    etags in part order. `part_size` is already at least the store's minimum."""
    by_file = {f.key: parts_of(f, part_size) for f in files}
    parts = [p for ps in by_file.values() for p in ps]
    etags: dict[str, list[str]] = {key: [""] * len(ps) for key, ps in by_file.items()}

    def send(p: Part) -> None:
        data = local.read_range(p.key, p.offset, p.length) if p.length else b""
        etags[p.key][p.number - 1] = ctx.store.upload_part(p.key, started[p.key], p.number, data)
        ctx.stats.incr("committer_bytes_uploaded", p.length)
        ctx.stats.incr("committer_parts_uploaded")

    ctx.pool.for_each(send, parts)
    return etags


@stage("task_stage_save_pendingset", "save_pendingset", level=TASK_LEVEL)
def save_pendingset(
    ctx: StageContext, pendingsets: Store, path: str, pendingset: PendingSet, dest: Store
) -> str:
    """Save the attempt's pendingset (its URIs name `dest`); its presence commits the task."""
    pendingsets.write_bytes(path, pendingset.to_bytes(dest))
    return pendingsets.full_url(path)
