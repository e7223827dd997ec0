"""The local file system store (plain paths and `file://` URLs).

Renames use renameat2(RENAME_NOREPLACE) where the kernel offers it, so "never overwrite, never
merge into an existing directory" holds atomically; elsewhere a check precedes the rename.
Etags are derived from (inode, mtime, size): like ABFS etags they survive a rename and change
when the file is rewritten.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat as stat_mod
from typing import BinaryIO

from ..errors import (
    AccessDenied,
    AlreadyExists,
    NotADirectory,
    NotFound,
    StoreError,
)
from . import paths
from .base import Store
from .oserrors import from_os_error
from .types import Capabilities, FileStatus, Op

LOCAL_CAPABILITIES = Capabilities(
    atomic_file_rename=True,
    atomic_dir_rename=True,
    o1_dir_rename=True,
    etags=True,
    etags_preserved_by_rename=True,
    consistent_listing=True,
    conditional_create=True,
    multipart_upload=False,
    native_append=True,  # O_APPEND
    native_positional_write=True,  # pwrite(2), truncate(2)
)

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _load_renameat2():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()


def _etag(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


class LocalStore(Store):
    """A directory on the local file system."""

    def __init__(self, root: str) -> None:
        if root.startswith("file://"):
            root = root[len("file://") :]
        self.root = os.path.abspath(os.path.expanduser(root))
        super().__init__("file://" + self.root, LOCAL_CAPABILITIES)

    def __reduce__(self):
        return (LocalStore, (self.root,))

    def _abs(self, path: str) -> str:
        return os.path.join(self.root, path) if path else self.root

    def _status(self, path: str, st: os.stat_result) -> FileStatus:
        """A status from a stat result; from `lstat`, a symbolic link is itself (is_link)."""
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        return FileStatus(
            path=path,
            size=0 if is_dir else st.st_size,
            is_dir=is_dir,
            etag=None if is_dir else _etag(st),
            mtime=st.st_mtime,
            is_link=stat_mod.S_ISLNK(st.st_mode),
        )

    def _translate(self, e: OSError, path: str, what: str) -> StoreError:
        where = self.full_url(path) if path is not None else self.url
        msg = f"{what} {where}: {e.strerror or e}"
        return from_os_error(e, msg, path)

    # --- primitives ----------------------------------------------------------------------------

    def _stat(self, path: str) -> FileStatus:
        try:
            return self._status(path, os.stat(self._abs(path)))
        except OSError as e:
            raise self._translate(e, path, "stat") from None

    def _list(self, path: str) -> list[FileStatus]:
        """Links are listed as themselves, never followed: a link in a task's output must not
        carry its target's files into the destination (and a dangling one must not crash)."""
        try:
            with os.scandir(self._abs(path)) as it:
                out = [
                    self._status(paths.join(path, d.name), d.stat(follow_symlinks=False))
                    for d in it
                ]
        except OSError as e:
            raise self._translate(e, path, "list") from None
        return sorted(out, key=lambda s: s.path)

    def _walk(self, path: str) -> list[FileStatus]:
        """Every file and every link (as itself, like `_list`); never descends into a link."""
        out: list[FileStatus] = []
        base = self._abs(path)
        if not os.path.isdir(base):
            return out
        for dirpath, dirs, files in os.walk(base, followlinks=False):
            rel_dir = os.path.relpath(dirpath, self.root)
            rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
            # os.walk puts links to directories among `dirs` (and does not enter them)
            links = [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]
            for f in files + links:
                full = os.path.join(dirpath, f)
                try:
                    out.append(self._status(paths.join(rel_dir, f), os.lstat(full)))
                except FileNotFoundError:
                    continue  # deleted while we walked
        return sorted(out, key=lambda s: s.path)

    def _mkdirs(self, path: str) -> None:
        target = self._abs(path)
        try:
            os.makedirs(target, exist_ok=True)
        except FileExistsError:
            raise AlreadyExists(
                f"mkdirs {self.full_url(path)}: a file is in the way", path
            ) from None
        except NotADirectoryError:
            raise NotADirectory(
                f"mkdirs {self.full_url(path)}: an ancestor is a file", path
            ) from None
        except OSError as e:
            raise self._translate(e, path, "mkdirs") from None

    def _delete(self, path: str, recursive: bool) -> bool:
        target = self._abs(path)
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise self._translate(e, path, "delete") from None
        try:
            if not stat_mod.S_ISDIR(st.st_mode):
                os.unlink(target)
            elif recursive:
                shutil.rmtree(target)
            else:
                os.rmdir(target)
        except FileNotFoundError:
            return False
        except OSError as e:
            if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise StoreError(
                    f"delete {self.full_url(path)}: directory not empty (recursive=False)", path
                ) from None
            raise self._translate(e, path, "delete") from None
        return True

    def _rename(self, src: str, dst: str) -> None:
        s, d = self._abs(src), self._abs(dst)
        if _renameat2 is not None:
            rc = _renameat2(_AT_FDCWD, os.fsencode(s), _AT_FDCWD, os.fsencode(d), _RENAME_NOREPLACE)
            if rc == 0:
                return
            err = ctypes.get_errno()
            if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
                self._raise_rename(err, src, dst)
        # fallback: check, then rename (not atomic against a concurrent creator of dst)
        if os.path.lexists(d):
            self._raise_rename(errno.EEXIST, src, dst)
        try:
            os.rename(s, d)
        except OSError as e:
            self._raise_rename(e.errno or 0, src, dst)

    def _raise_rename(self, err: int, src: str, dst: str) -> None:
        what = f"rename {self.full_url(src)} to {self.full_url(dst)}"
        if err == errno.EEXIST or err == errno.ENOTEMPTY:
            raise AlreadyExists(f"{what}: destination exists", dst)
        if err == errno.ENOENT:
            if not os.path.lexists(self._abs(src)):
                raise NotFound(f"{what}: source does not exist", src)
            raise NotFound(f"{what}: destination's parent directory does not exist", dst)
        if err == errno.ENOTDIR:
            raise NotADirectory(f"{what}: a path component is a file", dst)
        if err in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise AccessDenied(f"{what}: permission denied", dst)
        raise StoreError(f"{what}: {os.strerror(err)}", src)

    def _copy(self, src: str, dst: str) -> None:
        try:
            os.makedirs(os.path.dirname(self._abs(dst)), exist_ok=True)
            shutil.copyfile(self._abs(src), self._abs(dst))
        except OSError as e:
            raise self._translate(e, src, "copy") from None

    def _read(self, path: str) -> bytes:
        try:
            with open(self._abs(path), "rb") as f:
                return f.read()
        except OSError as e:
            raise self._translate(e, path, "read") from None

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        target = self._abs(path)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
            _write_all(os.open(target, flags, 0o644), data)
        except OSError as e:
            raise self._translate(e, path, "write") from None

    def _append(self, path: str, data: bytes) -> None:
        """O_APPEND: what was appended survives the process dying right after."""
        target = self._abs(path)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            _write_all(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), data)
        except OSError as e:
            raise self._translate(e, path, "append") from None

    def _write_at(self, path: str, offset: int, data: bytes | memoryview) -> None:
        target = self._abs(path)
        try:
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
            except FileNotFoundError:  # parents are created on first use only
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o644)
            _write_all(fd, data, offset)
        except OSError as e:
            raise self._translate(e, path, "write") from None

    def _truncate(self, path: str, size: int) -> None:
        try:
            os.truncate(self._abs(path), size)
        except OSError as e:
            raise self._translate(e, path, "truncate") from None

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        try:
            fd = os.open(self._abs(path), os.O_RDONLY)
            try:
                return os.pread(fd, length, start)
            finally:
                os.close(fd)
        except OSError as e:
            raise self._translate(e, path, "read") from None

    def open_read(self, path: str) -> BinaryIO:
        """A real file handle: large files are read as a stream, not loaded whole."""
        path = paths.normalize(path)

        def _open() -> BinaryIO:
            try:
                return open(self._abs(path), "rb")
            except OSError as e:
                raise self._translate(e, path, "read") from None

        return self._op(Op.READ, path, _open)

    def open_write(self, path: str, overwrite: bool = True) -> BinaryIO:
        """A real file handle: large outputs (shuffle data) stream to disk."""
        path = paths.normalize(path)

        def _open() -> BinaryIO:
            target = self._abs(path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                return open(target, "wb" if overwrite else "xb")
            except OSError as e:
                raise self._translate(e, path, "write") from None

        return self._op(Op.WRITE, path, _open)


def _write_all(fd: int, data: bytes | memoryview, offset: int | None = None) -> None:
    """Write every byte to an open descriptor (at `offset` if given), then close it."""
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
            view = view[n:]
            if offset is not None:
                offset += n
    finally:
        os.close(fd)
