"""The local file system store (plain paths and `file://` URLs).

No symbolic link below the root is ever followed: every operation opens its path's parent directory
with `nofollow.open_dir` (one openat2 call refusing links, or O_NOFOLLOW per component) and acts
relative to that descriptor, with O_NOFOLLOW on the final open, so a path through a link raises
`LinkRefused` naming the link, and nothing outside the root is created, read, moved or deleted.
Listings and walks show a link as itself (`is_link`); `stat` of a link answers for the link. The
root itself may be a link (the user's choice): it is resolved once, when the store is made.

Whole-file writes (`write_bytes`, `create_if_absent`, `copy`, closed `open_write` streams) go to
a hidden name beside the file (`paths.TEMP_PREFIX`), renamed into place: a reader sees all or
none (`files`); an exclusive create is renameat2(RENAME_NOREPLACE) or link-then-unlink.

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
from collections.abc import Callable
from typing import BinaryIO, TypeVar

from ...errors import (
    AccessDenied,
    AlreadyExists,
    IsADirectory,
    LinkRefused,
    NotADirectory,
    NotFound,
    StoreError,
)
from .. import paths
from ..base import Store, not_empty, read_capped, record_too_large
from ..oserrors import from_os_error
from ..types import Capabilities, FileStatus, Op
from . import files as lf
from . import nofollow
from .nofollow import DIR_HANDLE, DIR_READ
from .ranges import KeptOpen

T = TypeVar("T")

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


def _etag(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


class LocalStore(KeptOpen, Store):
    """A directory on the local file system (see the module's docstring)."""

    def __init__(self, root: str, _resolved: str | None = None) -> None:
        if root.startswith("file://"):
            root = root[len("file://") :]
        self.root = os.path.abspath(os.path.expanduser(root))
        self._real = _resolved or os.path.realpath(self.root)  # what I/O goes through
        super().__init__("file://" + self.root, LOCAL_CAPABILITIES)

    def __reduce__(self):
        return (LocalStore, (self.root, self._real))

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
        if isinstance(e, StoreError):
            return e
        where = self.full_url(path) if path is not None else self.url
        msg = f"{what} {where}: {e.strerror or e}"
        return from_os_error(e, msg, path)

    def _link_refused(self, what: str, path: str, link: str) -> LinkRefused:
        return nofollow.refused(self.full_url, what, path, link)

    def _fail(self, e: OSError, what: str, path: str, rel: str) -> StoreError:
        """The error for an open of `rel` (on behalf of `path`) that failed: LinkRefused when a
        link is on the way, else the operating system's error as ours."""
        if isinstance(e, StoreError):
            return e
        link = nofollow.link_on_path(self._real, rel, e)
        if link is None:
            return self._translate(e, path, what)
        return self._link_refused(what, path, link)

    def _dir(
        self, rel: str, what: str, path: str, create: bool = False, flags: int = DIR_HANDLE
    ) -> int:
        """A descriptor of the directory `rel` (no link followed); with `create`, missing
        directories are made (never through a link)."""
        try:
            return nofollow.open_dir(self._real, rel, flags)
        except OSError as e:
            if create and e.errno in (errno.ENOENT, errno.ENOTDIR):
                return self._make_dirs(rel, what, path, flags)
            raise self._fail(e, what, path, rel) from None

    def _parent(self, path: str, what: str, create: bool = False) -> tuple[int, str]:
        parent, _, name = path.rpartition("/")
        return self._dir(parent, what, path, create=create), name

    def _make_dirs(self, rel: str, what: str, path: str, flags: int = DIR_HANDLE) -> int:
        """Make the missing directories of `rel` (never through a link) and open the last."""
        try:
            os.makedirs(self._real, exist_ok=True)  # the root (created on first use)
            return nofollow.make_dirs(self._real, rel, flags)
        except nofollow.InTheWay as e:
            if e.is_link:
                raise self._link_refused(what, path, e.probe) from None
            if e.probe == path or (what == "mkdirs" and e.probe == rel):
                raise AlreadyExists(
                    f"{what} {self.full_url(path)}: a file is in the way", path
                ) from None
            raise NotADirectory(
                f"{what} {self.full_url(path)}: {self.full_url(e.probe)} is a file", path
            ) from None
        except OSError as e:
            raise self._translate(e, path, what) from None

    def _open_file(self, path: str, what: str, flags: int, create: bool = False) -> int:
        """Open a file with O_NOFOLLOW, no component of its path followed if it is a link
        (with `create`, its missing parent directories are made first)."""
        try:
            return nofollow.open_file(self._real, path, flags)
        except OSError as e:
            if not (create and e.errno == errno.ENOENT):
                raise self._fail(e, what, path, path) from None
        os.close(self._parent(path, what, create=True)[0])  # the parents made: once more
        try:
            return nofollow.open_file(self._real, path, flags)
        except OSError as e:
            raise self._fail(e, what, path, path) from None

    # --- whole-file writes: a hidden name beside the file, renamed into place -------------------

    def _check_target(self, pfd: int, name: str, path: str, what: str, overwrite: bool) -> None:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat_mod.S_ISLNK(st.st_mode):
            raise self._link_refused(what, path, path)
        if stat_mod.S_ISDIR(st.st_mode):
            raise IsADirectory(f"{what} {self.full_url(path)}: a directory is there", path)
        if not overwrite:
            raise AlreadyExists(f"{what} {self.full_url(path)}: file exists", path)

    def _publish(
        self, pfd: int, tmp: str, name: str, overwrite: bool, path: str, what: str
    ) -> None:
        try:
            lf.publish_at(pfd, tmp, name, overwrite)
        except FileExistsError:
            self._check_target(pfd, name, path, what, overwrite=False)  # a link is refused
            raise AlreadyExists(f"{what} {self.full_url(path)}: file exists", path) from None
        except OSError as e:
            raise self._translate(e, path, what) from None

    def _write_whole(
        self, path: str, overwrite: bool, what: str, fill: Callable[[int], None]
    ) -> None:
        pfd, name = self._parent(path, what, create=True)
        try:
            self._check_target(pfd, name, path, what, overwrite)
            fd, tmp = lf.open_temp(pfd, name)
            try:
                fill(fd)
            except BaseException:
                lf.unlink_quietly(pfd, tmp)
                raise
            self._publish(pfd, tmp, name, overwrite, path, what)
        except OSError as e:
            raise self._translate(e, path, what) from None
        finally:
            os.close(pfd)

    def _stat(self, path: str) -> FileStatus:
        """A link is answered as itself (is_link, its own size), never followed."""
        try:
            if not path:  # the root itself (resolved when the store was made), even a file
                return self._status("", os.stat(self._real))
        except OSError as e:
            raise self._translate(e, path, "stat") from None
        pfd, name = self._parent(path, "stat")
        try:
            return self._status(path, os.stat(name, dir_fd=pfd, follow_symlinks=False))
        except OSError as e:
            raise self._translate(e, path, "stat") from None
        finally:
            os.close(pfd)

    def _list(self, path: str) -> list[FileStatus]:
        """Links are listed as themselves, never followed: a link in a task's output must not
        carry its target's files into the destination (and a dangling one must not crash). A
        linked directory itself is refused (LinkRefused)."""
        fd = self._dir(path, "list", path, flags=DIR_READ)
        out: list[FileStatus] = []
        try:
            with os.scandir(fd) as it:
                for d in it:
                    try:
                        st = d.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # deleted since it was listed
                    out.append(self._status(f"{path}/{d.name}" if path else d.name, st))
        except OSError as e:
            raise self._translate(e, path, "list") from None
        finally:
            os.close(fd)
        return sorted(out, key=lambda s: s.path)

    def _walk(self, path: str) -> list[FileStatus]:
        """Every file and every link (as itself, like `_list`); never descends into a link, and
        a walk of a linked directory is refused."""
        try:
            fd = self._dir(path, "walk", path, flags=DIR_READ)
        except (NotFound, NotADirectory):
            return []
        out: list[FileStatus] = []
        try:
            lf.walk_fd(fd, path, self._status, out)
        except OSError as e:
            raise self._translate(e, path, "walk") from None
        finally:
            os.close(fd)
        return sorted(out, key=lambda s: s.path)

    def _mkdirs(self, path: str) -> None:
        os.close(self._dir(path, "mkdirs", path, create=True))

    def _delete(self, path: str, recursive: bool) -> bool:
        """A link is refused, whether it is the path or one of its parents; a recursive delete
        removes the links inside the tree themselves, never what they point to."""
        if not path:
            return self._delete_root(recursive)
        parent, _, name = path.rpartition("/")
        try:
            pfd = nofollow.open_dir(self._real, parent)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise self._fail(e, "delete", path, parent) from None
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if stat_mod.S_ISLNK(st.st_mode):
                raise self._link_refused("delete", path, path)
            if not stat_mod.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=pfd)
            elif recursive:
                # the descriptor-based rmtree: it unlinks links and never enters them
                shutil.rmtree(name, onerror=lf.rmtree_onerror, dir_fd=pfd)
            else:
                os.rmdir(name, dir_fd=pfd)
        except FileNotFoundError:
            return False
        except StoreError:
            raise
        except OSError as e:
            raise self._delete_error(e, path) from None
        finally:
            os.close(pfd)
        return True

    def _delete_root(self, recursive: bool) -> bool:
        try:
            st = os.lstat(self._real)
            if not stat_mod.S_ISDIR(st.st_mode):
                os.unlink(self._real)
            elif recursive:
                shutil.rmtree(self._real, onerror=lf.rmtree_onerror)
            else:
                os.rmdir(self._real)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise self._delete_error(e, "") from None
        return True

    def _delete_error(self, e: OSError, path: str) -> StoreError:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            return self._translate(e, path, "delete")
        return not_empty(self.full_url(path), path)

    def _rename(self, src: str, dst: str) -> None:
        what = f"rename {self.full_url(src)} to {self.full_url(dst)}"
        if not src or not dst:
            raise StoreError(f"{what}: the store's root cannot be renamed", src or dst)
        sparent, _, sname = src.rpartition("/")
        dparent, _, dname = dst.rpartition("/")
        spfd = self._rename_dir(sparent, src, what, "source does not exist")
        try:
            dpfd = self._rename_dir(
                dparent, dst, what, "destination's parent directory does not exist"
            )
            try:
                self._rename_at(spfd, sname, dpfd, dname, src, dst, what)
            finally:
                os.close(dpfd)
        finally:
            os.close(spfd)

    def _rename_dir(self, rel: str, path: str, what: str, missing: str) -> int:
        """The parent directory of a rename's source or destination, no link followed."""
        try:
            return nofollow.open_dir(self._real, rel)
        except OSError as e:
            link = nofollow.link_on_path(self._real, rel, e)
            if link is not None:
                raise LinkRefused(
                    f"{what}: {self.full_url(link)} is a symbolic link (links are not followed)",
                    link,
                ) from None
            if e.errno == errno.ENOENT:
                raise NotFound(f"{what}: {missing}", path) from None
            self._raise_rename(e.errno or 0, path, path, what)
            raise AssertionError("unreachable") from None

    def _rename_at(
        self, spfd: int, sname: str, dpfd: int, dname: str, src: str, dst: str, what: str
    ) -> None:
        try:
            st = os.stat(sname, dir_fd=spfd, follow_symlinks=False)
        except FileNotFoundError:
            raise NotFound(f"{what}: source does not exist", src) from None
        except OSError as e:
            self._raise_rename(e.errno or 0, src, dst, what)
        if stat_mod.S_ISLNK(st.st_mode):
            raise LinkRefused(
                f"{what}: {self.full_url(src)} is a symbolic link (links are not followed)", src
            )
        if lf.renameat2 is not None:
            rc = lf.renameat2(
                spfd, os.fsencode(sname), dpfd, os.fsencode(dname), lf.RENAME_NOREPLACE
            )
            if rc == 0:
                return
            err = ctypes.get_errno()
            if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
                self._raise_rename(err, src, dst, what, (spfd, sname, dpfd, dname))
        # fallback: check, then rename (not atomic against a concurrent creator of dst)
        if lf.lexists(dpfd, dname):
            self._raise_rename(errno.EEXIST, src, dst, what, (spfd, sname, dpfd, dname))
        try:
            os.rename(sname, dname, src_dir_fd=spfd, dst_dir_fd=dpfd)
        except OSError as e:
            self._raise_rename(e.errno or 0, src, dst, what, (spfd, sname, dpfd, dname))

    def _raise_rename(
        self,
        err: int,
        src: str,
        dst: str,
        what: str,
        at: tuple[int, str, int, str] = (-1, "", -1, ""),
    ) -> None:
        spfd, sname, dpfd, dname = at  # where to look (the parents' descriptors), if known
        if err == errno.EEXIST or err == errno.ENOTEMPTY:
            if dpfd >= 0 and lf.is_link(dpfd, dname):
                raise LinkRefused(
                    f"{what}: {self.full_url(dst)} is a symbolic link (links are not followed)",
                    dst,
                )
            raise AlreadyExists(f"{what}: destination exists", dst)
        if err == errno.ENOENT:
            if spfd >= 0 and not lf.lexists(spfd, sname):
                raise NotFound(f"{what}: source does not exist", src)
            raise NotFound(f"{what}: destination's parent directory does not exist", dst)
        if err == errno.ENOTDIR:
            raise NotADirectory(f"{what}: a path component is a file", dst)
        if err in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise AccessDenied(f"{what}: permission denied", dst)
        raise StoreError(f"{what}: {os.strerror(err)}", src)

    def _copy(self, src: str, dst: str) -> None:
        sfd = self._open_file(src, "copy", os.O_RDONLY)
        try:
            if stat_mod.S_ISDIR(os.fstat(sfd).st_mode):
                raise IsADirectory(f"copy {self.full_url(src)}: is a directory", src)
            self._write_whole(dst, True, "copy", lambda fd: lf.copy_all(sfd, fd))
        finally:
            os.close(sfd)

    def _read(self, path: str, max_bytes: int | None = None) -> bytes:
        fd = self._open_file(path, "read", os.O_RDONLY)
        try:
            with os.fdopen(fd, "rb") as f:
                if max_bytes is None:
                    return f.read()
                st = os.fstat(f.fileno())
                if stat_mod.S_ISDIR(st.st_mode):
                    raise IsADirectory(f"read {self.full_url(path)}: is a directory", path)
                size = st.st_size
                if size > max_bytes:
                    raise record_too_large(self.full_url(path), path, size, max_bytes)
                data = read_capped(f, size, max_bytes)
                if len(data) > max_bytes:
                    raise record_too_large(self.full_url(path), path, len(data), max_bytes)
                return data
        except StoreError:
            raise
        except OSError as e:
            raise self._translate(e, path, "read") from None

    def _write(self, path: str, data: bytes, overwrite: bool) -> None:
        """Complete or absent: written under a hidden name beside, then renamed into place."""
        self._write_whole(path, overwrite, "write", lambda fd: lf.write_all(fd, data))

    def _append(self, path: str, data: bytes) -> None:
        """O_APPEND: what was appended survives the process dying right after."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        lf.write_all(self._open_file(path, "append", flags, create=True), data)

    def _write_at(self, path: str, offset: int, data: bytes | memoryview) -> None:
        fd = self._open_file(path, "write", os.O_WRONLY | os.O_CREAT, create=True)
        try:
            lf.write_all(fd, data, offset)
        except OSError as e:
            raise self._translate(e, path, "write") from None

    def _truncate(self, path: str, size: int) -> None:
        self._on_file(path, "truncate", os.O_WRONLY, lambda fd: os.ftruncate(fd, size))

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        return self._on_file(path, "read", os.O_RDONLY, lambda fd: os.pread(fd, length, start))

    def _read_view(self, path: str, start: int, length: int) -> memoryview:
        return self._on_file(path, "read", os.O_RDONLY, lambda fd: lf.map_range(fd, start, length))

    def _on_file(self, path: str, what: str, flags: int, fn: Callable[[int], T]) -> T:
        """`fn` of the file opened with `flags` (no link followed), closed after."""
        fd = self._open_file(path, what, flags)
        try:
            return fn(fd)
        except OSError as e:
            raise self._translate(e, path, what) from None
        finally:
            os.close(fd)

    def open_read(self, path: str) -> BinaryIO:
        """A real file handle: large files are read as a stream, not loaded whole."""
        path = paths.normalize(path)
        opened = lambda: os.fdopen(self._open_file(path, "read", os.O_RDONLY), "rb")  # noqa: E731
        return self._op(Op.READ, path, opened)

    def open_write(self, path: str, overwrite: bool = True) -> BinaryIO:
        """A real file handle (large outputs, shuffle data, stream to disk) on a hidden name
        beside the file; closing it renames it into place. A stream left by an exception (or
        never closed) publishes nothing."""
        path = paths.normalize(path)

        def _open() -> BinaryIO:
            pfd, name = self._parent(path, "write", create=True)
            try:
                self._check_target(pfd, name, path, "write", overwrite)
                fd, tmp = lf.open_temp(pfd, name)
            except BaseException as e:
                os.close(pfd)
                if isinstance(e, OSError):
                    raise self._translate(e, path, "write") from None
                raise
            return lf.AtomicWriter(
                fd, pfd, tmp, lambda: self._publish(pfd, tmp, name, overwrite, path, "write")
            )

        return self._making_parents(self._op, Op.WRITE, path, _open)
