"""Opening directories below a local store's root without following a symbolic link.

`open_dir(root, rel)` gives a descriptor of the directory `root/rel`, refusing a link at any
component of `rel`. The local store then works relative to that descriptor (`dir_fd=`), with
O_NOFOLLOW on the final open, so a link swapped in after the check cannot redirect it: the window
between check and use is closed, not merely narrowed.

On Linux 5.6 and later this is one openat2(2) call with RESOLVE_NO_SYMLINKS on the whole path
(`root` has been resolved once, with realpath, when the store was opened, so it holds no link of
its own). Elsewhere (an older kernel, a seccomp filter that refuses openat2) each component is
opened in turn with O_NOFOLLOW | O_DIRECTORY relative to its parent's descriptor.

Errors are the operating system's: ELOOP or ENOTDIR when a component is a link (ENOTDIR also
when it is a file), ENOENT when one is missing; `find_link` names the link on that path.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat as stat_mod
from collections.abc import Callable

from ...errors import LinkRefused

O_PATH = getattr(os, "O_PATH", 0)  # a handle for *at() calls only (Linux); 0 elsewhere
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR = os.O_DIRECTORY | O_CLOEXEC
DIR_HANDLE = (O_PATH or os.O_RDONLY) | _DIR  # for dir_fd= use
DIR_READ = os.O_RDONLY | _DIR  # for scandir
LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)  # O_NOFOLLOW's answers to a link
_AT_FDCWD = -100
_RESOLVE_NO_SYMLINKS = 0x04
_SYS_OPENAT2 = 437  # the same number on every Linux architecture but alpha


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_openat2():
    if not hasattr(os, "O_PATH"):  # not Linux
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    return fn


_syscall = _load_openat2()
_HOW = {
    flags: _OpenHow(flags, 0, _RESOLVE_NO_SYMLINKS) for flags in (DIR_HANDLE, DIR_READ)
}  # read only by the kernel: shared by every thread
_HOW_SIZE = ctypes.sizeof(_OpenHow)
_use_openat2 = _syscall is not None


def use_openat2(enabled: bool) -> bool:
    """Turn the one-call path on or off (tests run the per-component path too); returns the
    previous setting. It cannot be turned on where the kernel lacks openat2."""
    global _use_openat2
    previous = _use_openat2
    _use_openat2 = enabled and _syscall is not None
    return previous


def _openat2(root: str, rel: str, how: _OpenHow) -> int | None:
    """openat2(2) of `root/rel` as `how` says; None where this kernel cannot (no such call, a
    seccomp filter's EPERM, a size or flag it does not know): the caller opens it another
    way. Any other failure is raised as the operating system's error."""
    fd = _syscall(
        _SYS_OPENAT2, _AT_FDCWD, os.fsencode(f"{root}/{rel}"), ctypes.byref(how), _HOW_SIZE
    )
    if fd >= 0:
        return fd
    err = ctypes.get_errno()
    if err not in (errno.ENOSYS, errno.EPERM, errno.E2BIG, errno.EINVAL):
        raise OSError(err, os.strerror(err), f"{root}/{rel}")
    return None


def open_dir(root: str, rel: str, flags: int = DIR_HANDLE) -> int:
    """A descriptor of the directory `root/rel` (rel store-relative, "" for the root itself),
    no component of `rel` followed if it is a link. The caller closes it."""
    global _use_openat2
    if not rel:
        return os.open(root, flags)
    if _use_openat2:
        fd = _openat2(root, rel, _HOW.get(flags) or _OpenHow(flags, 0, _RESOLVE_NO_SYMLINKS))
        if fd is not None:
            return fd
        fd = _open_each(root, rel, flags)
        _use_openat2 = False  # no openat2 here (an old kernel, a seccomp filter's EPERM)
        return fd
    return _open_each(root, rel, flags)


def open_file(root: str, rel: str, flags: int, mode: int = 0o644) -> int:
    """A descriptor of the file `root/rel` opened with `flags` and O_NOFOLLOW, no component of
    `rel` followed if it is a link: one openat2 call where there is one, else the parent
    directory by `open_dir` and an openat in it."""
    flags |= O_NOFOLLOW | O_CLOEXEC
    if not rel:
        return os.open(root, flags, mode)
    if _use_openat2:
        key = (flags, mode)
        how = _FILE_HOW.get(key)
        if how is None:
            creating = flags & (os.O_CREAT | getattr(os, "O_TMPFILE", 0))
            how = _FILE_HOW.setdefault(
                key, _OpenHow(flags, mode if creating else 0, _RESOLVE_NO_SYMLINKS)
            )
        fd = _openat2(root, rel, how)
        if fd is not None:
            return fd
    parent, _, name = rel.rpartition("/")
    pfd = open_dir(root, parent)
    try:
        return os.open(name, flags, mode, dir_fd=pfd)
    finally:
        os.close(pfd)


_FILE_HOW: dict[tuple[int, int], _OpenHow] = {}


def _open_each(root: str, rel: str, flags: int, create: bool = False) -> int:
    """Open each component of `rel` in turn with O_NOFOLLOW, relative to its parent's
    descriptor; a descriptor of the last (opened with `flags`). With `create`, each missing
    component is made first, and a link or a file on the way raises InTheWay."""
    fd = os.open(root, DIR_HANDLE if rel else flags)
    parts = rel.split("/") if rel else []
    probe = ""
    try:
        for i, part in enumerate(parts):
            probe = f"{probe}/{part}" if probe else part
            how = (flags if i == len(parts) - 1 else DIR_HANDLE) | O_NOFOLLOW
            try:
                try:
                    nxt = os.open(part, how, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:  # made only where it is missing: one call for each one that is there
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nxt = os.open(part, how, dir_fd=fd)
            except OSError as e:
                if not create or e.errno not in LINK_ERRNOS:
                    raise
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                raise InTheWay(probe, stat_mod.S_ISLNK(st.st_mode)) from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def find_link(root: str, rel: str) -> str | None:
    """The first component of `rel` (as a store-relative path) that is a symbolic link; None if
    none is (a component is missing or a file). Only asked after an open failed."""
    return _lstat_each(root, rel)[0]


def link_on_path(root: str, rel: str, e: OSError) -> str | None:
    """The link on `rel` that the error `e` of an O_NOFOLLOW open of it stands for; None where
    `e` is not how such an open answers a link, or no component is one."""
    return find_link(root, rel) if e.errno in LINK_ERRNOS else None


def _lstat_each(root: str, path: str) -> tuple[str | None, os.stat_result | None]:
    """lstat each component of `path` in turn: (the first that is a link, its lstat), else
    (None, the last one's lstat); (None, None) where a component is missing or under a file."""
    probe = ""
    st = None
    for part in path.split("/") if path else ():
        probe = f"{probe}/{part}" if probe else part
        try:
            st = os.lstat(f"{root}/{probe}")
        except OSError:
            return None, None
        if stat_mod.S_ISLNK(st.st_mode):
            return probe, st
    return None, st


def refused(full_url: Callable[[str], str], what: str, path: str, link: str) -> LinkRefused:
    """The error for an operation on `path` whose component `link` is a symbolic link."""
    if link == path:
        return LinkRefused(
            f"{what} {full_url(path)}: is a symbolic link (links are not followed)", link
        )
    return LinkRefused(
        f"{what} {full_url(path)}: {full_url(link)} is a symbolic link (links are not followed)",
        link,
    )


def lstat_walk(root: str, path: str) -> tuple[str | None, os.stat_result | None]:
    """(the first link among `path`'s components or None, the last component's lstat or None
    where a component is missing): one lstat per component, for stores that cannot work
    relative to descriptors (fsspec's local file system). With openat2 it is one call (an
    O_PATH open refusing links on the way, then fstat)."""
    if _use_openat2 and path:
        try:
            fd = open_file(root, path, O_PATH)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                return None, None  # resolution stops at a link (ELOOP) before any of these
            if e.errno != errno.ELOOP:
                raise
            return find_link(root, path), None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return (path if stat_mod.S_ISLNK(st.st_mode) else None), st
    return _lstat_each(root, path)


class InTheWay(OSError):
    """`make_dirs` found a link (`is_link`) or a file at `probe` (a store-relative path)."""

    def __init__(self, probe: str, is_link: bool) -> None:
        super().__init__(errno.ENOTDIR, "in the way", probe)
        self.probe, self.is_link = probe, is_link


def make_dirs(root: str, rel: str, flags: int = DIR_HANDLE) -> int:
    """mkdir each missing component of `rel` below the existing directory `root` and open it
    with O_NOFOLLOW (a link, even one put there between the mkdir and the open, is refused);
    a descriptor of the last. Raises InTheWay for a link or a file on the way."""
    return _open_each(root, rel, flags, create=True)
