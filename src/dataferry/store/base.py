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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, BinaryIO, TypeVar

from ..errors import AlreadyExists, AmbiguousOutcome, ConfigError, NotFound
from ..stats import IOStatistics
from . import paths

T = TypeVar("T")
AMBIGUOUS_RETRIES = 3  # asks of an idempotent operation whose outcome was unknown


class Op(StrEnum):
    """Kinds of store operation; the statistic name is `op_<value>`."""

    STAT = "get_file_status"
    LIST = "list_status"
    WALK = "list_files"
    MKDIRS = "mkdirs"
    DELETE = "delete"
    RENAME = "rename"
    COPY = "copy"
    READ = "open"
    WRITE = "create"
    CREATE_IF_ABSENT = "create_if_absent"
    APPEND = "append"
    WRITE_AT = "write_at"
    TRUNCATE = "truncate"
    READ_RANGE = "read_range"
    MULTIPART_INITIATE = "multipart_initiate"
    MULTIPART_PART = "multipart_upload_part"
    MULTIPART_COMPLETE = "multipart_complete"
    MULTIPART_ABORT = "multipart_abort"
    MULTIPART_LIST = "multipart_list"

    @property
    def mutates(self) -> bool:
        return self in _MUTATING


_MUTATING = {
    Op.MKDIRS,
    Op.DELETE,
    Op.RENAME,
    Op.COPY,
    Op.WRITE,
    Op.CREATE_IF_ABSENT,
    Op.APPEND,
    Op.WRITE_AT,
    Op.TRUNCATE,
    Op.MULTIPART_INITIATE,
    Op.MULTIPART_PART,
    Op.MULTIPART_COMPLETE,
    Op.MULTIPART_ABORT,
}


@dataclass(frozen=True)
class FileStatus:
    path: str
    size: int
    is_dir: bool
    etag: str | None = None
    mtime: float | None = None
    is_link: bool = False  # a symbolic link, listed as itself (never followed)

    @property
    def name(self) -> str:
        return paths.name(self.path)


@dataclass(frozen=True)
class PendingUpload:
    """A multipart upload that was started and neither completed nor aborted."""

    path: str
    upload_id: str
    initiated: float  # seconds since the epoch


@dataclass(frozen=True)
class Capabilities:
    """What a committer may rely on. Unknown means False."""

    atomic_file_rename: bool = False
    atomic_dir_rename: bool = False
    o1_dir_rename: bool = False
    etags: bool = False
    etags_preserved_by_rename: bool = False
    consistent_listing: bool = True
    conditional_create: bool = False
    multipart_upload: bool = False

    def as_dict(self) -> dict[str, bool]:
        return asdict(self)


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
        with self.stats.duration(f"op_{op.value}"):
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
        from ..errors import StoreError

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

    def read_bytes(self, path: str) -> bytes:
        path = paths.normalize(path)
        return self._idempotent(Op.READ, path, self._read, path)

    def write_bytes(self, path: str, data: bytes, overwrite: bool = True) -> None:
        """Write a whole file (parents are created); with overwrite=False raises AlreadyExists."""
        path = paths.normalize(path)
        run = self._idempotent if overwrite else self._op
        run(Op.WRITE, path, self._write, path, bytes(data), overwrite)

    def create_if_absent(self, path: str, data: bytes = b"") -> bool:
        """Create a file only if nothing is there; True if this call created it."""
        path = paths.normalize(path)
        return self._op(Op.CREATE_IF_ABSENT, path, self._create_if_absent, path, bytes(data))

    def open_read(self, path: str) -> BinaryIO:
        return io.BytesIO(self.read_bytes(path))

    def append_bytes(self, path: str, data: bytes) -> None:
        """Append to a file (created if absent). Where the store cannot append, the whole file
        is rewritten, which is atomic on object stores (one PUT)."""
        path = paths.normalize(path)
        self._op(Op.APPEND, path, self._append, path, bytes(data))

    def _append(self, path: str, data: bytes) -> None:
        try:
            old = self._read(path)
        except NotFound:
            old = b""
        self._write(path, old + data, True)

    def write_at(self, path: str, offset: int, data: bytes | memoryview) -> None:
        """Write bytes at an offset of a file (created if absent), leaving the rest in place:
        the shuffle merge writes each block at the committed end, so a failed write is simply
        overwritten by the next one. Stores without positional writes rewrite the file."""
        path = paths.normalize(path)
        self._op(Op.WRITE_AT, path, self._write_at, path, offset, data)

    def truncate(self, path: str, size: int) -> None:
        """Cut a file to `size` bytes (drops a partial tail after a failure)."""
        path = paths.normalize(path)
        self._op(Op.TRUNCATE, path, self._truncate, path, size)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        """`length` bytes from `start` (fewer at the end of the file)."""
        path = paths.normalize(path)
        return self._op(Op.READ_RANGE, path, self._read_range, path, start, length)

    def _write_at(self, path: str, offset: int, data: bytes) -> None:
        try:
            old = self._read(path)
        except NotFound:
            old = b""
        head = old[:offset].ljust(offset, b"\0")
        self._write(path, head + data + old[offset + len(data) :], True)

    def _truncate(self, path: str, size: int) -> None:
        self._write(path, self._read(path)[:size], True)

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        return self._read(path)[start : start + length]

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

    def open_write(self, path: str, overwrite: bool = True) -> BinaryIO:
        """A stream whose bytes become the file, all at once, when it is closed."""
        return _WriteOnClose(self, paths.normalize(path), overwrite)

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
    def _read(self, path: str) -> bytes: ...

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


class WrappingStore(Store):
    """A store that forwards every primitive to an inner store's public operation.

    Subclasses override `_op` (to add latency, faults, ...) or single primitives.
    """

    def __init__(self, inner: Store, capabilities: Capabilities | None = None) -> None:
        super().__init__(inner.url, capabilities or inner.capabilities)
        self.inner = inner

    def describe(self) -> str:
        return self.inner.describe()

    @property
    def min_part_size(self) -> int:
        return self.inner.min_part_size

    def _stat(self, path: str) -> FileStatus:
        return self.inner.stat(path)

    def _list(self, path: str) -> list[FileStatus]:
        return self.inner.list(path)

    def _walk(self, path: str) -> list[FileStatus]:
        return self.inner.walk(path)

    def _mkdirs(self, path: str) -> None:
        self.inner.mkdirs(path)

    def _delete(self, path: str, recursive: bool) -> bool:
        return self.inner.delete(path, recursive)

    def _rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def _copy(self, src: str, dst: str) -> None:
        self.inner.copy(src, dst)

    def _read(self, path: str) -> bytes:
        return self.inner.read_bytes(path)

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        self.inner.write_bytes(path, data, overwrite)

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        return self.inner.create_if_absent(path, data)

    def _append(self, path: str, data: bytes) -> None:
        self.inner.append_bytes(path, data)

    def _write_at(self, path: str, offset: int, data: bytes) -> None:
        self.inner.write_at(path, offset, data)

    def _truncate(self, path: str, size: int) -> None:
        self.inner.truncate(path, size)

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        return self.inner.read_range(path, start, length)

    def _initiate_upload(self, path: str) -> str:
        return self.inner.initiate_upload(path)

    def _upload_part(self, path: str, upload_id: str, number: int, data: bytes) -> str:
        return self.inner.upload_part(path, upload_id, number, data)

    def _complete_upload(self, path: str, upload_id: str, etags: list[str]) -> str:
        return self.inner.complete_upload(path, upload_id, etags)

    def _abort_upload(self, path: str, upload_id: str) -> bool:
        return self.inner.abort_upload(path, upload_id)

    def _list_uploads(self, path: str) -> list[PendingUpload]:
        return self.inner.list_uploads(path)


class _WriteOnClose(io.BytesIO):
    """Buffer writes and publish the whole file on close, as object stores do."""

    def __init__(self, store: Store, path: str, overwrite: bool) -> None:
        super().__init__()
        self._store, self._path, self._overwrite = store, path, overwrite
        self._published = False

    def close(self) -> None:
        if not self._published and not self.closed:
            self._published = True
            self._store.write_bytes(self._path, self.getvalue(), self._overwrite)
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:  # a failed writer publishes nothing
            self._published = True
        self.close()
