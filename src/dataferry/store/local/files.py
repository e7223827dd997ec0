"""Descriptor-level helpers of the local store: renameat2, whole-file writes under a hidden
name renamed into place (`open_temp`, `publish_at`, `AtomicWriter`), and small *at() probes.

Everything here works relative to a directory descriptor the caller opened without following a
link (`nofollow.open_dir`), so none of it can be redirected through one.
"""

from __future__ import annotations

import ctypes
import errno
import io
import mmap
import os
import stat as stat_mod
from collections.abc import Callable
from typing import Any

from .. import paths
from .nofollow import DIR_READ, LINK_ERRNOS, O_CLOEXEC, O_NOFOLLOW

AT_FDCWD = -100
RENAME_NOREPLACE = 1


def _load_renameat2():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


renameat2 = _load_renameat2()


_RMTREE_GONE = (FileNotFoundError,)


def rmtree_onerror(func: Any, path: Any, exc_info: Any) -> None:
    if not issubclass(exc_info[0], _RMTREE_GONE):  # an entry deleted meanwhile is fine
        raise exc_info[1]


def open_temp(pfd: int, name: str) -> tuple[int, str]:
    """Create the hidden temporary file beside `name` (O_EXCL, O_NOFOLLOW): (fd, its name)."""
    while True:
        tmp = paths.temporary_name(name, os.urandom(6).hex())
        try:
            return os.open(tmp, TEMP_FLAGS, 0o644, dir_fd=pfd), tmp
        except FileExistsError:
            continue


def publish_at(pfd: int, tmp: str, name: str, overwrite: bool) -> None:
    """Rename the written temporary file `tmp` to `name` in the directory `pfd`: replacing what
    is there (os.replace), or only where nothing is (renameat2 RENAME_NOREPLACE, else link
    then unlink: FileExistsError). The temporary name is gone afterwards whatever happened."""
    try:
        if overwrite:
            os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            return
        if renameat2 is not None:
            if renameat2(pfd, os.fsencode(tmp), pfd, os.fsencode(name), RENAME_NOREPLACE) == 0:
                return
            err = ctypes.get_errno()
            if err not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
                raise OSError(err, os.strerror(err))
        os.link(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd, follow_symlinks=False)
        unlink_quietly(pfd, tmp)
    except BaseException:
        unlink_quietly(pfd, tmp)
        raise


class AtomicWriter(io.BufferedWriter):
    """A local file written under a hidden name; `close` renames it into place, unless the
    `with` block raised (or the stream is dropped unclosed): then it is removed."""

    def __init__(self, fd: int, pfd: int, tmp: str, publish: Callable[[], None]) -> None:
        # 64 KiB: a write task keeps one of these open per partition (1 MiB each held 40 MiB
        # for 40 partitions); larger writes pass through to the file unbuffered
        super().__init__(io.FileIO(fd, "wb"), buffer_size=64 << 10)
        self._pfd, self._tmp, self._publish = pfd, tmp, publish
        self._finished = False
        self._discard = False

    def close(self) -> None:
        if self._finished:
            return
        self._finished = True
        pfd = self._pfd
        try:
            try:
                super().close()  # flushes, then closes the descriptor
            except BaseException:
                unlink_quietly(pfd, self._tmp)
                raise
            if self._discard:
                unlink_quietly(pfd, self._tmp)
            else:
                self._publish()
        finally:
            os.close(pfd)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:  # a failed writer publishes nothing
            self._discard = True
        self.close()

    def __del__(self) -> None:
        if not self._finished:
            self._discard = True
            try:
                self.close()
            except Exception:
                pass


TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC


def unlink_quietly(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def lexists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat_mod.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def copy_all(src_fd: int, dst_fd: int) -> None:
    """Every byte of one open file into another (sendfile where the kernel can), then close
    the destination."""
    try:
        offset = 0
        try:
            while True:
                n = os.sendfile(dst_fd, src_fd, offset, 1 << 30)
                if n == 0:
                    return
                offset += n
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP) or offset:
                raise
        while True:
            chunk = os.pread(src_fd, 1 << 20, offset)
            if not chunk:
                return
            view = memoryview(chunk)
            while view:
                view = view[os.write(dst_fd, view) :]
            offset += len(chunk)
    finally:
        os.close(dst_fd)


# a shared read-only mapping whose pages are mapped at once, not faulted in one by one
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def map_range(fd: int, start: int, length: int) -> memoryview:
    """`length` bytes of an open file from `start` (fewer at its end), mapped read-only, its
    pages populated in one call. A file truncated under a live view faults its reader: the
    stores replace files by rename, and cut back only a shuffle merge's files, before any
    reader has them."""
    end = min(os.fstat(fd).st_size, start + length)
    if end <= start:
        return memoryview(b"")
    base = start - start % mmap.ALLOCATIONGRANULARITY
    mapped = mmap.mmap(fd, end - base, flags=_MAP_FLAGS, prot=mmap.PROT_READ, offset=base)
    return memoryview(mapped)[start - base : end - base]


def write_all(fd: int, data: bytes | memoryview, offset: int | None = None) -> None:
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


def walk_fd(
    fd: int, rel: str, status: Callable[[str, os.stat_result], Any], out: list[Any]
) -> None:
    """Append `status(path, lstat)` of every file and link below the directory `fd` (at `rel`)
    to `out`: subdirectories are opened with O_NOFOLLOW, so a link is listed, never entered;
    at most one descriptor per level is open."""
    subdirs: list[tuple[str, str]] = []
    with os.scandir(fd) as it:
        for d in it:
            child = f"{rel}/{d.name}" if rel else d.name
            try:
                if d.is_dir(follow_symlinks=False):
                    subdirs.append((d.name, child))
                else:
                    out.append(status(child, d.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue  # deleted while we walked
    for name, child in subdirs:
        try:
            cfd = os.open(name, DIR_READ | O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno not in LINK_ERRNOS:
                raise
            try:  # replaced by a link or a file since it was listed: list it as itself
                out.append(status(child, os.stat(name, dir_fd=fd, follow_symlinks=False)))
            except FileNotFoundError:
                pass
            continue
        try:
            walk_fd(cfd, child, status, out)
        finally:
            os.close(cfd)
