"""The `Store` interface: the only way dataferry touches files or object stores.

A store is rooted at a URL; every operation takes a store-relative path (see `paths`). Every
public operation is timed and counted in `store.stats` under Hadoop-style names (`op_rename`,
`op_rename.failures`, ...). Implementations provide the `_`-prefixed primitives; wrappers
(latency models, fault injection) stack on top of another store and route every call through
`_op`, so statistics, models and faults apply to every committer for free.
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, TypeVar

from ..errors import (
    AlreadyExists,
    AmbiguousOutcome,
    ConfigError,
    NotFound,
    RecordTooLarge,
    StoreError,
)
from ..stats import IOStatistics
from . import paths
from .etags import multipart_etag
from .streams import WriteOnClose
from .types import Capabilities, FileStatus, Op, PendingUpload

T = TypeVar("T")
AMBIGUOUS_RETRIES = 3  # asks of an idempotent operation whose outcome was unknown
# tries of a write whose new parent directory another job removed meanwhile: each lost try
# is another job's progress (a removal of an emptied directory), never a standing fault. A
# remote store pays a round trip per try; a local disk a few microseconds, so it tries on
# while jobs that clean up in a tight loop keep winning the window (each try is cheap)
PARENT_REMOVED_RETRIES = 5
LOCAL_PARENT_REMOVED_RETRIES = 200


def record_too_large(url: str, path: str, size: int, max_bytes: int) -> RecordTooLarge:
    """The error for a read of `path` (at `url`) that found `size` bytes over its cap."""
    return RecordTooLarge(
        f"read {url}: {size} bytes, more than the {max_bytes} allowed", path, size, max_bytes
    )


def not_empty(url: str, path: str) -> StoreError:
    """The error for a delete without `recursive` of the directory `path` (at `url`) that
    holds something."""
    return StoreError(f"delete {url}: directory not empty (recursive=False)", path)


def read_capped(f: Any, size: int, max_bytes: int) -> bytes:
    """At most max_bytes + 1 bytes of a stream whose size was `size` (<= max_bytes) when it was
    looked at: a read of size + 1 (buffers are sized by the request, so never by the cap), and
    more only if the file has grown since."""
    data = f.read(size + 1)
    while len(data) > size and len(data) <= max_bytes:  # grown since: read on, up to the cap
        more = f.read(min(max_bytes + 1 - len(data), 1 << 20))
        if not more:
            break
        data += more
    return data


_OP_NAMES = {op: f"op_{op.value}" for op in Op}  # each operation's duration statistic


class Store(ABC):
    """Abstract store. Subclasses implement the primitives; callers use the public methods."""

    url: str
    capabilities: Capabilities

    def __init__(self, url: str, capabilities: Capabilities) -> None:
        self.url = url.rstrip("/")
        self.capabilities = capabilities
        self.stats = IOStatistics()

    # --- the one hook every operation passes through -----------------------------------------

    def _op(self, op: Op, path: str, fn: Callable[..., T], *args: Any) -> T:
        # the operation's statistic named once (a shuffle service makes one operation per
        # merged block, and naming and timing each afresh took half its CPU)
        with self.stats.duration(_OP_NAMES[op]):
            return fn(*args)

    def _idempotent(self, op: Op, path: str, fn: Callable[..., T], *args: Any) -> T:
        """An operation that does the same when done twice (stat, list, delete, mkdirs, read, a
        write that overwrites) is asked again when its outcome was unknown (a timeout): the
        answer to the repeat is the answer. Renames, completions and exclusive creates are not
        repeated here: their callers resolve what happened."""
        for attempt in range(1, AMBIGUOUS_RETRIES + 1):
            try:
                result = self._op(op, path, fn, *args)
            except AmbiguousOutcome:
                if attempt == AMBIGUOUS_RETRIES:
                    raise
                self.stats.incr("store_ambiguous_retried")
                continue
            if op == Op.DELETE and attempt > 1:
                return True  # type: ignore[return-value]  # the unknown try may have deleted it
            return result
        raise AssertionError("unreachable")

    # --- public operations ---------------------------------------------------------------------

    def stat(self, path: str) -> FileStatus:
        """Status of a file or directory; raises NotFound."""
        path = paths.normalize(path)
        return self._idempotent(Op.STAT, path, self._stat, path)

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
        except NotFound:
            return False
        return True

    def list(self, path: str = "") -> list[FileStatus]:
        """Entries directly under a directory, sorted by name; raises NotFound/NotADirectory."""
        path = paths.normalize(path)
        return self._idempotent(Op.LIST, path, self._list, path)

    def list_or_empty(self, path: str = "") -> list[FileStatus]:
        """`list`, with [] where nothing is."""
        try:
            return self.list(path)
        except NotFound:
            return []

    def delete_if_empty(self, path: str) -> bool:
        """Delete a directory only while it holds nothing (a job's shared parents: another job
        may still have work in them); False where it holds something or is gone."""
        try:
            if self.list(path):
                return False
            return self.delete(path, recursive=False)
        except StoreError:
            return False

    def walk(self, path: str = "") -> list[FileStatus]:
        """Every file below a directory (recursively), sorted by path; [] if it does not exist."""
        path = paths.normalize(path)
        return self._idempotent(Op.WALK, path, self._walk, path)

    def mkdirs(self, path: str) -> None:
        """Create a directory and its parents; raises if a file is in the way."""
        path = paths.normalize(path)
        self._idempotent(Op.MKDIRS, path, self._mkdirs, path)

    def delete(self, path: str, recursive: bool = False) -> bool:
        """Delete a file or directory; False if nothing was there."""
        path = paths.normalize(path)
        return self._idempotent(Op.DELETE, path, self._delete, path, recursive)

    def rename(self, src: str, dst: str) -> None:
        """Rename a file or directory. Raises if src is missing, dst exists (never merges into
        an existing directory and never overwrites a file) or dst's parent is not a directory."""
        src, dst = paths.normalize(src), paths.normalize(dst)
        self._op(Op.RENAME, src, self._rename, src, dst)

    def copy(self, src: str, dst: str) -> None:
        """Server-side copy of one file (overwrites dst)."""
        src, dst = paths.normalize(src), paths.normalize(dst)
        self._op(Op.COPY, src, self._copy, src, dst)

    def read_bytes(self, path: str, max_bytes: int | None = None) -> bytes:
        """The whole file. With `max_bytes` (a record's cap), a larger file raises
        RecordTooLarge naming both sizes, and is not read into memory."""
        path = paths.normalize(path)
        if max_bytes is None:
            return self._idempotent(Op.READ, path, self._read, path)
        if type(max_bytes) is not int or max_bytes < 0:
            raise ConfigError(f"max_bytes must be an int >= 0 or None, got {max_bytes!r}")
        data = self._idempotent(Op.READ, path, self._read, path, max_bytes)
        if len(data) > max_bytes:  # an implementation that could not cap its read
            raise RecordTooLarge(
                f"read {self.full_url(path)}: {len(data)} bytes, more than the {max_bytes} allowed",
                path,
                len(data),
                max_bytes,
            )
        return data

    def _making_parents(self, run: Callable[..., T], op: Op, path: str, *args: Any) -> T:
        """Run a write that makes the directories above its file. On a store with real
        directories another job may remove one of them, empty, between its making and the
        file's creation (jobs remove shared directories such as `_dataferry/` once they are
        empty: `delete_if_empty`); the write is then refused with NotFound, having created
        nothing, and is made again, parents included. Once the file is in its directory, that
        directory cannot be removed as empty."""
        local = self.url.startswith("file://")
        tries = LOCAL_PARENT_REMOVED_RETRIES if local else PARENT_REMOVED_RETRIES
        for left in range(tries - 1, -1, -1):
            try:
                return run(op, path, *args)
            except NotFound:
                if not left:
                    raise
                self.stats.incr("store_parent_removed_retried")
        raise AssertionError("unreachable")

    def write_bytes(self, path: str, data: bytes, overwrite: bool = True) -> None:
        """Write a whole file (parents are created); with overwrite=False raises AlreadyExists."""
        path = paths.normalize(path)
        run = self._idempotent if overwrite else self._op
        self._making_parents(run, Op.WRITE, path, self._write, path, bytes(data), overwrite)

    def create_if_absent(self, path: str, data: bytes = b"") -> bool:
        """Create a file only if nothing is there; True if this call created it."""
        path = paths.normalize(path)
        return self._making_parents(
            self._op, Op.CREATE_IF_ABSENT, path, self._create_if_absent, path, bytes(data)
        )

    def open_read(self, path: str) -> BinaryIO:
        return io.BytesIO(self.read_bytes(path))

    def append_bytes(self, path: str, data: bytes) -> None:
        """Append to a file (created if absent).

        Where `capabilities.native_append` is False this is a whole-file rewrite: the file is
        read and written back with `data` at its end (one PUT on an object store, so atomic,
        but its cost grows with the file; each is counted as `append_rewrites`). The marker
        service's `MARKERS<n>` files, which stay small, are the caller that accepts that.
        """
        path = paths.normalize(path)
        self._making_parents(self._op, Op.APPEND, path, self._append, path, bytes(data))

    def _append(self, path: str, data: bytes) -> None:
        self.stats.incr("append_rewrites")
        try:
            old = self._read(path)
        except NotFound:
            old = b""
        self._write(path, old + data, True)

    def write_at(self, path: str, offset: int, data: bytes | memoryview) -> None:
        """Write bytes at an offset of a file (created if absent), leaving the rest in place:
        the shuffle merge writes each block at the committed end, so a failed write is simply
        overwritten by the next one. Only stores with `capabilities.native_positional_write`
        do this; others raise ConfigError rather than rewrite the whole file per block."""
        path = paths.normalize(path)
        self._require_positional_write("write at an offset")
        self._op(Op.WRITE_AT, path, self._write_at, path, offset, data)

    def truncate(self, path: str, size: int) -> None:
        """Cut a file to `size` bytes (drops a partial tail after a failure); only on stores
        with `capabilities.native_positional_write`, like `write_at`."""
        path = paths.normalize(path)
        self._require_positional_write("truncate")
        self._op(Op.TRUNCATE, path, self._truncate, path, size)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """`length` bytes from `start` (fewer at the end of the file)."""
        path = paths.normalize(path)
        return self._op(Op.READ_RANGE, path, self._read_range, path, start, length)

    def read_view(self, path: str, start: int, length: int) -> memoryview:
        """`read_range`'s bytes as a read-only view. A local store maps the file's pages rather
        than copying them into fresh memory, which costs a page fault per page of a buffer
        used once (a shuffle's reducer reads each merged file once); the view stays whole if
        the file is deleted or replaced by a rename, which is how stores replace files."""
        path = paths.normalize(path)
        return self._op(Op.READ_RANGE, path, self._read_view, path, start, length)

    def positional_writer(self, path: str) -> PositionalWriter:
        """A writer of many `write_at`s to `path`, one after another (a shuffle merge's
        blocks of one partition): here one `write_at` each, so a wrapping store (faults,
        latency) sees every write; a local store keeps the file open between them."""
        return PositionalWriter(self, path)

    def range_reader(self, path: str) -> RangeReader:
        """A reader of many ranges of `path`, one after another (a shuffle reducer's blocks of
        one map output): here one `read_range` per range, so a wrapping store (faults,
        latency) sees every read; a local store keeps the file open between them."""
        return RangeReader(self, path)

    def read_ranges_into(self, reads: Sequence[tuple[RangeReader, int, memoryview]]) -> list[int]:
        """Each (reader, start, view) read as `reader.read_into(start, view)` reads it (readers
        of stores of this kind); how many bytes each got. Here one after another, each seen by
        a wrapping store; a local store reads its kept-open files as one operation."""
        return [reader.read_into(start, view) for reader, start, view in reads]

    def external_commit(self, path: str, fn: Callable[[], T]) -> T:
        """Run, as one operation of this store, a change that a format's own library makes
        at `path` outside it (a Delta log entry, an Iceberg catalog's pointer swap): counted
        and timed, and open to fault rules like any other (a crash before it, an answer lost
        after it took effect), so the referee breaks table commits where it breaks files."""
        path = paths.normalize(path)
        return self._op(Op.TABLE_COMMIT, path, self._external_commit, path, fn)

    def _external_commit(self, path: str, fn: Callable[[], T]) -> T:
        return fn()

    def _require_positional_write(self, what: str) -> None:
        if not self.capabilities.native_positional_write:
            raise ConfigError(
                f"{self.describe()} cannot {what} in place (no native positional writes); "
                "use a local directory"
            )

    def _no_positional_write(self, *_args: Any) -> Any:
        raise ConfigError(f"{self.describe()} has no positional writes")

    _write_at = _truncate = _no_positional_write

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        return self._read(path)[start : start + length]

    def _read_view(self, path: str, start: int, length: int) -> memoryview:
        return memoryview(self._read_range(path, start, length))

    # --- multipart upload (stores with capabilities.multipart_upload) -------------------------

    def initiate_upload(self, path: str) -> str:
        """Start a multipart upload to `path`; nothing is visible there until it completes."""
        path = paths.normalize(path)
        return self._op(Op.MULTIPART_INITIATE, path, self._initiate_upload, path)

    def upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        """Upload part `number` (1-based); returns its etag."""
        path = paths.normalize(path)
        return self._op(
            Op.MULTIPART_PART, path, self._upload_part, path, upload_id, number, bytes(data)
        )

    def complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        """Make the upload visible at `path`, parts in order; returns the object's etag."""
        path = paths.normalize(path)
        return self._op(
            Op.MULTIPART_COMPLETE, path, self._complete_upload, path, upload_id, list(etags)
        )

    def abort_upload(self, path: str, upload_id: str) -> bool:
        """Abort an upload; False if it was no longer pending."""
        path = paths.normalize(path)
        return self._op(Op.MULTIPART_ABORT, path, self._abort_upload, path, upload_id)

    def list_uploads(self, path: str = "") -> list[PendingUpload]:
        """Uploads pending under `path` (a prefix), oldest first."""
        path = paths.normalize(path)
        return self._op(Op.MULTIPART_LIST, path, self._list_uploads, path)

    def upload_completed(self, path: str, upload_id: str, etags: list[str]) -> bool:
        """Whether the object at `path` is what completing this upload made (a resumed commit
        whose upload is no longer pending); asked as a stat is."""
        path = paths.normalize(path)
        return self._idempotent(Op.STAT, path, self._upload_completed, path, upload_id, list(etags))

    def _upload_completed(self, path: str, upload_id: str, etags: list[str]) -> bool:
        """By default the object's etag is the one the upload gives (S3's); a store whose
        uploads are not S3's (Azure's block lists) answers otherwise."""
        try:
            return self._stat(path).etag == self.upload_etag(etags)
        except NotFound:
            return False

    def _no_multipart(self, *_args: Any) -> Any:
        raise ConfigError(f"{self.describe()} has no multipart upload")

    _initiate_upload = _upload_part = _complete_upload = _abort_upload = _no_multipart

    @property
    def min_part_size(self) -> int:
        """Bytes every part of a multipart upload but the last must have at least (S3: 5 MiB,
        checked when the upload is completed), so a committer can size its parts to the store;
        0: no minimum (or no multipart upload)."""
        return 0

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        return []

    @property
    def lists_uploads(self) -> bool:
        """Whether `list_uploads` finds every pending upload (S3); False where uploads cannot
        be listed (GCS's sessions), so a resumed commit asks to complete each one."""
        return True

    def upload_etag(self, etags: list[str]) -> str:
        """The etag of the object an upload completed with these parts' etags becomes."""
        return multipart_etag(etags)

    def open_write(self, path: str, overwrite: bool = True) -> BinaryIO:
        """A stream whose bytes become the file, all at once, when it is closed."""
        path = paths.normalize(path)
        return WriteOnClose(lambda data: self.write_bytes(path, data, overwrite))

    def full_url(self, path: str = "") -> str:
        """Absolute URL of a store-relative path, in plain text: nothing is percent-encoded, so
        `a b%20` stays `a b%20` (for messages, and the form `relative_path` reads back). Commit
        records hold Hadoop's encoded form instead: `uris.to_hadoop_uri`."""
        path = paths.normalize(path)
        return f"{self.url}/{path}" if path else self.url

    def relative_path(self, url: str) -> str:
        """Exact inverse of full_url (no decoding: a literal `%` stays); raises ConfigError if
        the URL is not inside this store."""
        root = self.url
        if url == root:
            return ""
        if not url.startswith(root + "/"):
            raise ConfigError(f"{url!r} is not inside the store at {root!r}")
        return paths.normalize(url[len(root) + 1 :])

    def describe(self) -> str:
        return self.url

    # --- primitives ----------------------------------------------------------------------------

    @abstractmethod
    def _stat(self, path: str) -> FileStatus: ...

    @abstractmethod
    def _list(self, path: str) -> list[FileStatus]: ...

    @abstractmethod
    def _walk(self, path: str) -> list[FileStatus]: ...

    @abstractmethod
    def _mkdirs(self, path: str) -> None: ...

    @abstractmethod
    def _delete(self, path: str, recursive: bool) -> bool: ...

    @abstractmethod
    def _rename(self, src: str, dst: str) -> None: ...

    @abstractmethod
    def _copy(self, src: str, dst: str) -> None: ...

    @abstractmethod
    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        """The file's bytes; with `max_bytes`, RecordTooLarge for a larger file, found without
        reading it whole (a stat first, or a read of max_bytes + 1)."""

    @abstractmethod
    def _write(self, path: str, data: bytes, overwrite: bool) -> None: ...

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        """A write that refuses to overwrite; stores whose write(overwrite=False) is atomic
        (O_EXCL, If-None-Match) make this atomic too."""
        try:
            self._write(path, data, False)
        except AlreadyExists:
            return False
        return True


class RangeReader:
    """Ranges of one file of a store, read one after another (`Store.range_reader`); `close`
    when done."""

    def __init__(self, store: Store, path: str) -> None:
        self.store, self.path = store, paths.normalize(path)

    def read(self, start: int, length: int) -> bytes:
        """`length` bytes from `start` (fewer at the end of the file), as `read_range`."""
        return self.store.read_range(self.path, start, length)

    def read_into(self, start: int, view: memoryview) -> int:
        """Read into `view` (a writable byte buffer the caller owns) the bytes from `start`,
        as many as it holds (fewer at the end of the file); how many were read. Here a copy
        of `read`; a local file reads straight into the buffer."""
        data = self.read(start, len(view))
        view.cast("B")[: len(data)] = data
        return len(data)

    def close(self) -> None:
        """Release what the reader holds (nothing here)."""


class PositionalWriter:
    """Writes at offsets of one file of a store, one after another
    (`Store.positional_writer`); `close` when done."""

    def __init__(self, store: Store, path: str) -> None:
        self.store, self.path = store, paths.normalize(path)

    def write_at(self, offset: int, data: bytes | memoryview) -> None:
        """`store.write_at` of this file."""
        self.store.write_at(self.path, offset, data)

    def close(self) -> None:
        """Release what the writer holds (nothing here)."""
