"""The store's vocabulary: kinds of operation, file status, pending uploads and capabilities.

Plain values with no I/O, shared by every store and by the committers that read them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

from . import paths


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
    # a change a table format's own library makes (a Delta log entry, an Iceberg catalog's
    # pointer swap): one operation of the store for statistics and fault rules
    TABLE_COMMIT = "table_commit"

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
    Op.TABLE_COMMIT,
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
    # GCS's resumable upload sessions behind the multipart operations: parts in order, the
    # last one held until the session is finalized, no listing of sessions
    resumable_upload: bool = False
    # appends in place; without it `append_bytes` reads and rewrites the whole file
    native_append: bool = False
    # writes at an offset and truncates in place; without it `write_at` and `truncate` refuse
    native_positional_write: bool = False
    # multipart uploads are block lists (Azure Blob: Put Block stages under the final name,
    # Put Block List commits): `auto` picks the block-list committer
    block_lists: bool = False
    # closing a written file waits on the server (HDFS: the NameNode refuses `complete` until
    # a DataNode reports the file's last block, and the client retries half a second later):
    # a job commit writes its records ahead, beside its other work, and renames them in place
    slow_close: bool = False
    # every operation is a request the caller waits for a server to answer (HDFS's NameNode):
    # parallel I/O pays from the first call, so the I/O pool sends at once what it would
    # otherwise first sample one at a time (`IOPool`'s `adaptive`)
    remote_calls: bool = False
    # a recursive delete is one request the server carries out whole (HDFS: one NameNode
    # call for a directory and all below it): a job's directory goes in one call, not task
    # attempt by task attempt
    tree_delete: bool = False

    def as_dict(self) -> dict[str, bool]:
        return asdict(self)
