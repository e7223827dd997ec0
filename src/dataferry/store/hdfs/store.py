"""HDFS through hdfs-native (a Rust client of the NameNode's and DataNodes' own protocols: no
JVM, no libhdfs): `hdfs://host:port/path` and `viewfs://cluster/path`.

Every namespace change is one NameNode operation: a rename (rename2, without OVERWRITE) is
atomic for a file and for a whole directory and costs the same for either, and refuses an
existing destination; a create without overwrite refuses an existing file; a listing shows
every change the NameNode has acknowledged. The capabilities say so, and tests/store/test_hdfs.py
checks each on a real NameNode (a MiniDFSCluster).

A file being written is visible on HDFS (under construction) before it is closed, so a whole-
file write goes to a hidden name beside the file (`paths.TEMP_PREFIX`) and is renamed into place
once closed: over the old file (rename with OVERWRITE, atomic) or, for an exclusive create,
only where nothing is (rename without it). A reader sees the old file or the new one, whole.
A close that waits for the DataNode's report of the last block (hdfs-native retries it only
half a second later) is ended by the NameNode at the store's asking once the report is in
(`close.py`).
HDFS has no etags (file checksums cost a read of every block) and no server-side copy.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ...errors import AlreadyExists, DataferryError, NotADirectory, NotFound, StoreError
from .. import paths
from ..base import Store, read_capped, record_too_large
from ..types import Capabilities, FileStatus, Op
from .client import HdfsAddress, client_for, hadoop_config, hdfs_error, split_url
from .close import write_closed

HDFS_CAPABILITIES = Capabilities(
    atomic_file_rename=True,
    atomic_dir_rename=True,
    o1_dir_rename=True,
    etags=False,
    consistent_listing=True,
    conditional_create=True,
    native_append=False,  # HDFS appends, but a file's lease outlives a close: rewrites instead
    native_positional_write=False,
    slow_close=True,  # a written file's close waits for the DataNode's block report
    remote_calls=True,  # each operation is a NameNode (or DataNode) round trip
    tree_delete=True,  # delete(recursive) is one NameNode call for the whole tree
)


class HdfsStore(Store):
    """The files under `hdfs://namenode:port/path` (or `viewfs://cluster/path`); `config`
    holds Hadoop settings for the client (hdfs-site.xml's names)."""

    def __init__(self, url: str, config: Mapping[str, Any] | None = None) -> None:
        scheme, authority, root = split_url(url)
        self.address = HdfsAddress(scheme, authority, hadoop_config(config or {}, url))
        self.root = root.rstrip("/")  # "" for the file system's root
        super().__init__(f"{scheme}://{authority}{self.root}", HDFS_CAPABILITIES)

    def __reduce__(self) -> tuple[Any, ...]:
        return (HdfsStore, (self.url, dict(self.address.config)))

    @property
    def client(self) -> Any:
        return client_for(self.address)

    def _op(self, op: Op, path: str, fn: Any, *args: Any) -> Any:
        try:
            return super()._op(op, path, fn, *args)
        except DataferryError:
            raise
        except Exception as e:
            error = hdfs_error(e, f"{op.value} {self.full_url(path)}", path)
            if error is None:
                raise
            raise error from e

    def _abs(self, path: str) -> str:
        return f"{self.root}/{path}" if path else (self.root or "/")

    def _status(self, path: str, st: Any) -> FileStatus:
        return FileStatus(
            path=path,
            size=0 if st.isdir else int(st.length),
            is_dir=bool(st.isdir),
            mtime=st.modification_time / 1000.0,
        )

    def _rel(self, full: str) -> str:
        return paths.normalize(full[len(self.root) + 1 :])

    # --- primitives ----------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStatus:
        try:
            return self._status(path, self.client.get_file_info(self._abs(path)))
        except FileNotFoundError:
            raise NotFound(f"stat {self.full_url(path)}: no such file or directory", path) from None

    def _list(self, path: str) -> list[FileStatus]:
        full = self._abs(path)
        try:
            found = list(self.client.list_status(full))
        except FileNotFoundError:
            raise NotFound(f"list {self.full_url(path)}: no such directory", path) from None
        if len(found) == 1 and not found[0].isdir and found[0].path.rstrip("/") == full:
            raise NotADirectory(f"list {self.full_url(path)}: is a file", path)
        out = [self._status(self._rel(s.path), s) for s in found]
        return sorted(out, key=lambda s: s.path)

    def _walk(self, path: str) -> list[FileStatus]:
        try:
            found = list(self.client.list_status(self._abs(path), True))
        except FileNotFoundError:
            return []
        out = [self._status(self._rel(s.path), s) for s in found if not s.isdir]
        if len(out) == 1 and out[0].path == "":  # `path` is a file, not a directory
            return []
        return sorted(out, key=lambda s: s.path)

    def _mkdirs(self, path: str) -> None:
        try:
            self.client.mkdirs(self._abs(path), create_parent=True)
        except FileExistsError:  # the NameNode's "Path is not a directory": a file is there
            raise AlreadyExists(
                f"mkdirs {self.full_url(path)}: a file is in the way", path
            ) from None

    def _delete(self, path: str, recursive: bool) -> bool:
        if not path and not self.root:
            raise StoreError(
                f"delete {self.full_url()}: the file system's root is not deleted", path
            )
        return bool(self.client.delete(self._abs(path), recursive))

    def _rename(self, src: str, dst: str) -> None:
        what = f"rename {self.full_url(src)} to {self.full_url(dst)}"
        if not src or not dst:
            raise StoreError(f"{what}: the store's root cannot be renamed", src or dst)
        try:
            self.client.rename(self._abs(src), self._abs(dst), False)
        except FileNotFoundError as e:
            missing = (
                "source does not exist"
                if "source" in str(e)
                else "destination's parent directory does not exist"
            )
            raise NotFound(f"{what}: {missing}", src if "source" in str(e) else dst) from None
        except FileExistsError:
            raise AlreadyExists(f"{what}: destination exists", dst) from None

    def _copy(self, src: str, dst: str) -> None:
        self._write(dst, self._read(src), True)  # HDFS has no server-side copy

    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        try:
            reader = self.client.read(self._abs(path))
        except FileNotFoundError as e:
            why = "is a directory" if "not a file" in str(e) else "no such file"
            raise NotFound(f"read {self.full_url(path)}: {why}", path) from None
        size = len(reader)
        if max_bytes is not None and size > max_bytes:
            raise record_too_large(self.full_url(path), path, size, max_bytes)
        if max_bytes is None:
            return reader.read()
        return read_capped(reader, size, max_bytes)

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        try:
            reader = self.client.read(self._abs(path))
        except FileNotFoundError:
            raise NotFound(f"read {self.full_url(path)}: no such file", path) from None
        size = len(reader)
        if start >= size or length <= 0:  # hdfs-native panics on a read past the end
            return b""
        return reader.read_range(start, min(length, size - start))

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        if not self._publish(path, data, overwrite):
            raise AlreadyExists(f"write {self.full_url(path)}: file exists", path)

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        return self._publish(path, data, False)

    def _publish(self, path: str, data: bytes, overwrite: bool) -> bool:
        """Write `data` under a hidden name beside `path`, then rename it there (over a file
        only with `overwrite`); False where something was there and stays."""
        if not path:
            raise AlreadyExists(f"write {self.full_url()}: the store's root is a directory", path)
        import hdfs_native

        parent, _, name = path.rpartition("/")
        tmp = paths.join(parent, paths.temporary_name(name, os.urandom(6).hex()))
        client = self.client
        try:
            options = hdfs_native.WriteOptions(create_parent=True)
            if write_closed(client, self._abs(tmp), data, options):
                self.stats.incr("hdfs_closed_by_lease_recovery")  # its writer's close stalled
            try:
                client.rename(self._abs(tmp), self._abs(path), overwrite)
            except FileExistsError:
                return False
            except RuntimeError as e:  # OVERWRITE onto a directory
                if "must both be directories" in str(e) or "is a directory" in str(e):
                    if overwrite:
                        raise AlreadyExists(
                            f"write {self.full_url(path)}: a directory is there", path
                        ) from None
                    return False
                raise
            tmp = ""
            return True
        finally:
            if tmp:
                try:
                    client.delete(self._abs(tmp), False)
                except Exception:  # what could not be removed stays hidden
                    pass
