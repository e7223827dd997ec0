"""Any fsspec file system as a store: `memory://` for tests, gs/abfs/s3 URLs, and file system
objects users already hold (`open_store(path, filesystem=fs)`; pyarrow's arrive wrapped, see
`arrow`).

Capabilities come from a per-protocol table; a protocol not in it gets the conservative
default (nothing atomic, no etags), so `auto` never picks an unsafe committer for it. The
local file system (`file`) gets the local store's capabilities: its renames are rename(2), an
exclusive create is O_EXCL, and etags are derived from (inode, mtime, size) as LocalStore does.

Errors of the file system (OSError and its kinds, pyarrow's) come out as dataferry's.

Over the local disk (fsspec's LocalFileSystem, or pyarrow's LocalFileSystem wrapped), the store
keeps the local store's two promises: no symbolic link below the root is followed (each
operation first lstats its path's components and raises LinkRefused at a link; a link listed
or walked is itself, `is_link`; the root is resolved once, when the store is made), and a
whole-file write is complete or absent (written by fsspec under a hidden name beside the file,
`paths.TEMP_PREFIX`, then renamed into place: os.replace, or os.link for an exclusive create).
fsspec works on path strings, so unlike the local store's descriptor-relative operations the
check and the operation are two steps: a link swapped in between them is not caught.
"""

from __future__ import annotations

import errno
import logging
import os
import stat as stat_mod
import threading
from dataclasses import replace
from typing import Any

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from ...errors import (
    AlreadyExists,
    ConfigError,
    DataferryError,
    NotADirectory,
    NotFound,
)
from ...extras import missing_dependency
from .. import paths
from ..base import Store, not_empty, read_capped, record_too_large
from ..local import nofollow
from ..local.store import LOCAL_CAPABILITIES, LocalStore
from ..oserrors import exists_refusal
from ..types import Capabilities, FileStatus, Op
from .filesystems import is_local_disk, protocol_of, protocols_of, remove_quietly, store_error

_LOCAL_THROUGH_FSSPEC = replace(
    LOCAL_CAPABILITIES, native_append=False, native_positional_write=False
)
PROTOCOL_CAPABILITIES: dict[str, Capabilities] = {
    # In-process dict: a single rename or create is atomic under our lock; directory rename
    # moves key by key.
    "memory": Capabilities(
        atomic_file_rename=True,
        atomic_dir_rename=False,
        o1_dir_rename=False,
        etags=False,
        consistent_listing=True,
        conditional_create=True,
    ),
    "gs": Capabilities(etags=True, consistent_listing=True, conditional_create=True),
    "gcs": Capabilities(etags=True, consistent_listing=True, conditional_create=True),
    # abfs:// is the azure family's (store/azure): its capabilities are read from the account
    "s3": Capabilities(etags=True, consistent_listing=True, conditional_create=True),
    # a local directory, but through fsspec's whole-file writes: no append or write in place
    "file": _LOCAL_THROUGH_FSSPEC,
    "local": _LOCAL_THROUGH_FSSPEC,
}
_LOCAL_PROTOCOLS = ("file", "local")
log = logging.getLogger("dataferry.store")

_LOCKS: dict[str, threading.Lock] = {}


def _lock_for(url: str) -> threading.Lock:
    return _LOCKS.setdefault(url, threading.Lock())


def _modified(info: dict[str, Any]) -> Any:
    """The entry's modification time under the name its file system gives it: `mtime` (local,
    hdfs), `LastModified` (s3fs), `last_modified` (adlfs), else `created`."""
    for key in ("mtime", "LastModified", "last_modified", "created"):
        if info.get(key) is not None:
            return info[key]
    return None


class FsspecStore(Store):
    """A store over an fsspec file system, rooted at `url`.

    Either `FsspecStore(url, **storage_options)` (the file system is made from the URL, as
    `fsspec.url_to_fs` makes it), or `FsspecStore(path, fs=fs)` for a file system object, the
    path being inside it. `capabilities` overrides the protocol table's entry and `root_url`
    the store's URL (for wrapped file systems whose protocol is not a URL scheme).
    """

    def __init__(
        self,
        url: str,
        *,
        fs: AbstractFileSystem | None = None,
        capabilities: Capabilities | None = None,
        root_url: str | None = None,
        _resolved_root: str | None = None,
        **storage_options: Any,
    ) -> None:
        self._fs_arg = fs  # None: made from the URL (and made again from it when unpickled)
        if fs is None:
            try:
                fs, root = fsspec.core.url_to_fs(url, **storage_options)
            except ImportError as e:  # fsspec's "Install gcsfs to access GCS": name our extra
                missing = missing_dependency(e)
                if missing is None:
                    raise
                raise missing from e
        else:
            if storage_options:
                raise ConfigError(
                    "storage options configure a file system that the store makes; with a file "
                    f"system object, configure that object instead (got {sorted(storage_options)})"
                )
            root = fs._strip_protocol(url)
        protocol = protocol_of(fs)
        caps = capabilities or PROTOCOL_CAPABILITIES.get(protocol, Capabilities())
        self.fs = fs
        self.protocol = protocol
        self.root = root.rstrip("/")
        self._storage_options = storage_options
        self._url_arg = url
        self._given = (capabilities, root_url)
        if root_url is None:
            if protocol in _LOCAL_PROTOCOLS:
                root_url = "file://" + ("/" + self.root.lstrip("/"))
            else:
                root_url = f"{protocol}://{self.root.lstrip('/')}"
        super().__init__(root_url, caps)
        self._lock = _lock_for(self.url)
        # a local disk: links are refused and whole-file writes renamed into place
        self._local = is_local_disk(fs)
        self._disk: LocalStore | None = None
        if self._local:
            # the user's link, resolved once (and kept so when pickled)
            self.root = _resolved_root or os.path.realpath(self.root or "/")
            if not isinstance(fs, LocalFileSystem):
                # pyarrow's listings follow links (into the directories they point to): list
                # as the local store does, each link as itself
                self._disk = LocalStore(self.url, _resolved=self.root)

    def __reduce__(self):
        resolved = self.root if self._local else None
        return (
            _rebuild,
            (self._url_arg, self._storage_options, self._fs_arg, *self._given, resolved),
        )

    def describe(self) -> str:
        return self.url if self._fs_arg is None else f"{self.url} ({type(self.fs).__name__})"

    def _op(self, op: Op, path: str, fn: Any, *args: Any) -> Any:
        try:
            return super()._op(op, path, fn, *args)
        except DataferryError:
            raise
        except Exception as e:
            error = store_error(e, f"{op.value} {self.full_url(path)}", path)
            if error is None:
                raise
            raise error from e

    def _abs(self, path: str) -> str:
        if not path:  # a store at the file system's root ("/" strips to "")
            return self.root or getattr(self.fs, "root_marker", "") or "/"
        return f"{self.root}/{path}"

    def _rel(self, full: str) -> str:
        full = full.rstrip("/")
        root = self.root.rstrip("/")
        if self.protocol == "memory":
            full, root = "/" + full.lstrip("/"), "/" + root.lstrip("/")
        if full == root:
            return ""
        return paths.normalize(full[len(root) + 1 :])

    def _status(self, info: dict[str, Any]) -> FileStatus:
        is_dir = info.get("type") == "directory"
        etag = info.get("ETag") or info.get("etag") or info.get("md5Hash")
        mtime = _modified(info)
        if mtime is not None and not isinstance(mtime, int | float):
            mtime = getattr(mtime, "timestamp", lambda: None)()
        if etag is None and self.protocol in _LOCAL_PROTOCOLS and info.get("ino") is not None:
            # as LocalStore: survives a rename, changes when the file is rewritten
            ns = round((mtime or 0) * 1e9)
            etag = f"{int(info['ino']):x}-{ns:x}-{int(info.get('size') or 0):x}"
        return FileStatus(
            path=self._rel(info["name"]),
            size=0 if is_dir else int(info.get("size") or 0),
            is_dir=is_dir,
            etag=None if is_dir or etag is None else str(etag).strip('"'),
            mtime=mtime,
            # fsspec's local file system lists a link as itself (type "other", islink True)
            is_link=bool(info.get("islink")) or info.get("type") == "link",
        )

    def _is_dir(self, path: str) -> bool:
        try:
            return self.fs.isdir(self._abs(path))
        except FileNotFoundError:
            return False

    def _no_links(self, path: str, what: str, final: bool = True) -> os.stat_result | None:
        """On a local disk, raise LinkRefused where a component of `path` is a link (the last
        one only with `final`); the last component's lstat (None where it is missing)."""
        if not self._local or not path:
            return None
        link, st = nofollow.lstat_walk(self.root, path)
        if link is not None and (final or link != path):
            raise nofollow.refused(self.full_url, what, path, link)
        return st

    def _temporary(self, path: str) -> str:
        parent, _, name = path.rpartition("/")
        tmp = paths.temporary_name(name, os.urandom(6).hex())
        return self._abs(f"{parent}/{tmp}" if parent else tmp)

    def _publish_local(self, path: str, data: bytes, overwrite: bool) -> bool:
        """Write through fsspec under a hidden name beside `path`, then rename it into place
        (only where nothing is, without `overwrite`); False if something was there. Missing
        parent directories are made (after the caller's link check)."""
        full, tmp = self._abs(path), self._temporary(path)
        try:
            try:
                self.fs.pipe_file(tmp, data)
            except FileNotFoundError:
                self._make_parent_local(path)
                self.fs.pipe_file(tmp, data)
            if overwrite:
                os.replace(tmp, full)
                return True
            try:
                os.link(tmp, full, follow_symlinks=False)
            except FileExistsError:
                self._no_links(path, "write")  # a link there is refused, not "exists"
                return False
            return True
        except BaseException:
            remove_quietly(tmp)
            raise
        finally:
            if not overwrite:  # the link is the file now; an os.replace took the name away
                remove_quietly(tmp)

    def _make_parent_local(self, path: str) -> None:
        """Make `path`'s missing parent directories on a local disk. A directory another job
        removed between its making and the check that it is there (os.makedirs then answers
        "exists") is NotFound, so the write is made again, not refused as existing."""
        parent = paths.parent(path)
        full = self._abs(parent) if parent else self.root
        try:
            self.fs.makedirs(full, exist_ok=True)
        except FileExistsError as e:
            if os.path.lexists(e.filename or full):  # a file in the way: refused as before
                raise
            raise FileNotFoundError(errno.ENOENT, "removed while it was made", full) from None

    def _write_local(self, path: str, data: bytes, overwrite: bool, what: str) -> bool:
        """A whole-file write to a local disk: links refused, complete or absent."""
        st = self._no_links(path, what)
        if st is not None and stat_mod.S_ISDIR(st.st_mode):
            if what == "create":
                return False
            raise AlreadyExists(f"{what} {self.full_url(path)}: a directory is there", path)
        if (st is not None and not overwrite) or not self._publish_local(path, data, overwrite):
            if what == "create":
                return False
            raise AlreadyExists(f"{what} {self.full_url(path)}: file exists", path)
        return True

    # --- primitives ----------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStatus:
        """On a local disk a link is answered as itself (is_link), never followed."""
        lst = self._no_links(path, "stat", final=False)
        if lst is not None and stat_mod.S_ISLNK(lst.st_mode):
            return FileStatus(path, lst.st_size, False, None, lst.st_mtime, is_link=True)
        try:
            info = self.fs.info(self._abs(path))
        except FileNotFoundError:
            raise NotFound(f"stat {self.full_url(path)}: no such file or directory", path) from None
        st = self._status(info)
        return FileStatus(path, st.size, st.is_dir, st.etag, st.mtime)

    def _list(self, path: str) -> list[FileStatus]:
        if self._disk is not None:
            return [replace(s, etag=None) for s in self._disk._list(path)]
        self._no_links(path, "list")
        try:
            infos = self.fs.ls(self._abs(path), detail=True)
        except FileNotFoundError:
            raise NotFound(f"list {self.full_url(path)}: no such directory", path) from None
        out = [self._status(i) for i in infos]
        if len(out) == 1 and out[0].path == path and not out[0].is_dir:
            raise NotADirectory(f"list {self.full_url(path)}: is a file", path)
        return sorted((s for s in out if s.path != path), key=lambda s: s.path)

    def _walk(self, path: str) -> list[FileStatus]:
        if self._disk is not None:
            return [replace(s, etag=None) for s in self._disk._walk(path)]
        self._no_links(path, "walk")
        if not self._is_dir(path):
            return []
        found = self.fs.find(self._abs(path), detail=True)
        out = [self._status(i) for i in found.values() if i.get("type") != "directory"]
        return sorted(out, key=lambda s: s.path)

    def _mkdirs(self, path: str) -> None:
        self._no_links(path, "mkdirs")
        probe = path
        while probe:
            if self.fs.isfile(self._abs(probe)):
                raise AlreadyExists(f"mkdirs {self.full_url(path)}: a file is in the way", probe)
            probe = paths.parent(probe)
        self.fs.makedirs(self._abs(path), exist_ok=True)

    def _delete(self, path: str, recursive: bool) -> bool:
        """On a local disk a link (the path or a parent) is refused; the recursive delete is
        fsspec's (shutil.rmtree's descriptor-based walk), which unlinks links inside the tree
        and never enters them."""
        self._no_links(path, "delete")
        full = self._abs(path)
        if not self.fs.exists(full):
            return False
        if not self.fs.isdir(full):
            self.fs.rm_file(full)
        elif recursive:
            self.fs.rm(full, recursive=True)
        else:
            return self._delete_empty_dir(path, full)
        return True

    def _delete_empty_dir(self, path: str, full: str) -> bool:
        """Remove a directory only while it holds nothing. A check that it is empty followed
        by a recursive delete would take along a file written between the two (another
        job's record in a shared directory such as `_dataferry/`): on a local disk the
        operating system's rmdir refuses, in one step, a directory that is not empty; where
        directories are only names (object stores, memory) nothing below it is ever deleted,
        only its own marker, if the file system keeps one."""
        if self._local:
            try:
                os.rmdir(full)
            except FileNotFoundError:
                return False
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise not_empty(self.full_url(path), path) from None
                raise
            return True
        if self.fs.ls(full):
            raise not_empty(self.full_url(path), path)
        try:
            self.fs.rmdir(full)  # memory's pseudo-directory; a no-op where none are kept
        except OSError as e:  # a marker refused: never a reason to delete more
            log.debug("delete %s: its marker stays (%s)", self.full_url(path), e)
        return True

    def _rename(self, src: str, dst: str) -> None:
        what = f"rename {self.full_url(src)} to {self.full_url(dst)}"
        self._no_links(src, "rename")
        self._no_links(dst, "rename")
        with self._lock:
            if not self.fs.exists(self._abs(src)):
                raise NotFound(f"{what}: source does not exist", src)
            if self.fs.exists(self._abs(dst)):
                raise AlreadyExists(f"{what}: destination exists", dst)
            parent = paths.parent(dst)
            if parent and self.fs.isfile(self._abs(parent)):
                raise NotADirectory(f"{what}: destination's parent is a file", dst)
            recursive = self.fs.isdir(self._abs(src))
            self.fs.mv(self._abs(src), self._abs(dst), recursive=recursive)

    def _copy(self, src: str, dst: str) -> None:
        self._no_links(src, "copy")
        self._no_links(dst, "copy")
        if self._local:
            self._write(dst, self._read(src), True)  # complete or absent, as a write
            return
        try:
            self.fs.copy(self._abs(src), self._abs(dst))
        except FileNotFoundError:
            raise NotFound(f"copy {self.full_url(src)}: source does not exist", src) from None

    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        self._no_links(path, "read")
        try:
            if max_bytes is None:
                return self.fs.cat_file(self._abs(path))
            info = self.fs.info(self._abs(path))
            if info.get("type") == "directory":
                raise IsADirectoryError(path)
            size = int(info.get("size") or 0)
            data = b""
            if size <= max_bytes:  # a read of max_bytes + 1 (no seek: pyarrow's are streams)
                with self.fs.open(self._abs(path), "rb") as f:
                    data = read_capped(f, size, max_bytes)
            if size > max_bytes or len(data) > max_bytes:
                size = max(size, len(data))
                raise record_too_large(self.full_url(path), path, size, max_bytes)
            return data
        except FileNotFoundError:
            raise NotFound(f"read {self.full_url(path)}: no such file", path) from None
        except IsADirectoryError:
            raise NotFound(f"read {self.full_url(path)}: is a directory", path) from None

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        if self._local:
            self._write_local(path, data, overwrite, "write")
            return
        with self._lock:
            full = self._abs(path)
            if self.fs.isdir(full):
                raise AlreadyExists(f"write {self.full_url(path)}: a directory is there", path)
            if not overwrite and self.fs.exists(full):
                raise AlreadyExists(f"write {self.full_url(path)}: file exists", path)
            parent = paths.parent(path)
            if parent:
                self._mkdirs(parent)
            try:
                self.fs.pipe_file(full, data)
            except FileNotFoundError:  # the store's own root is not there yet (a directory)
                self.fs.makedirs(self.root, exist_ok=True)
                self.fs.pipe_file(full, data)

    def _create_if_absent(self, path: str, data: bytes) -> bool:
        """Exclusive create ("xb": O_EXCL locally, If-None-Match on s3fs), so two processes
        cannot both create the file; a file system without it falls back to check-then-write
        (exclusive within this process only)."""
        if self._local:  # complete or absent, and exclusive: os.link refuses an existing name
            return self._write_local(path, data, False, "create")
        full = self._abs(path)
        parent = paths.parent(path)
        if parent:
            self._mkdirs(parent)
        try:
            try:
                with self.fs.open(full, "xb") as f:
                    f.write(data)
            except FileNotFoundError:  # the store's own root is not there yet (a directory)
                self.fs.makedirs(self.root, exist_ok=True)
                with self.fs.open(full, "xb") as f:
                    f.write(data)
            return True
        except OSError as e:
            if exists_refusal(e):  # s3fs: EINVAL for a 412 that does not name its condition
                return False
            raise
        except (ValueError, NotImplementedError, TypeError):
            return super()._create_if_absent(path, data)


def _rebuild(
    url: str,
    storage_options: dict[str, Any],
    fs: AbstractFileSystem | None = None,
    capabilities: Capabilities | None = None,
    root_url: str | None = None,
    resolved_root: str | None = None,
) -> FsspecStore:
    return FsspecStore(
        url,
        fs=fs,
        capabilities=capabilities,
        root_url=root_url,
        _resolved_root=resolved_root,
        **storage_options,
    )


def filesystem_store(fs: AbstractFileSystem, url_or_path: str) -> FsspecStore:
    """A store over an fsspec file system object; `url_or_path` is a path inside it, or a URL
    with one of its protocols."""
    scheme = url_or_path.split("://", 1)[0] if "://" in url_or_path else ""
    if scheme and scheme not in protocols_of(fs):
        inside = url_or_path.split("://", 1)[1] or "/"
        raise ConfigError(
            f"filesystem= is an fsspec {type(fs).__name__} (protocol "
            f"{'/'.join(protocols_of(fs))}) and {url_or_path!r} has another scheme "
            f"({scheme}://): pass a path inside that file system (open_store({inside!r}, "
            f"filesystem=fs)), or drop filesystem= to open {scheme}:// itself"
        )
    return FsspecStore(url_or_path, fs=fs)
