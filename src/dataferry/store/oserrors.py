"""An operating system's error as dataferry's: the one mapping every file-system store uses,
so a missing file is `NotFound` whether the local disk, fsspec or pyarrow reported it."""

from __future__ import annotations

import errno

from ..errors import (
    AccessDenied,
    AlreadyExists,
    AmbiguousOutcome,
    IsADirectory,
    NotADirectory,
    NotFound,
    StoreError,
)

_BY_TYPE: tuple[tuple[type[OSError], type[StoreError]], ...] = (
    (FileNotFoundError, NotFound),
    (FileExistsError, AlreadyExists),
    (NotADirectoryError, NotADirectory),
    (IsADirectoryError, IsADirectory),
    (PermissionError, AccessDenied),
    (TimeoutError, AmbiguousOutcome),  # sent, answer lost: it may have happened
)
_BY_ERRNO = {errno.ENOENT: NotFound, errno.EEXIST: AlreadyExists}


def from_os_error(e: OSError, msg: str, path: str) -> StoreError:
    """The StoreError for `e`, carrying `msg` and the store-relative `path`."""
    for os_type, ours in _BY_TYPE:
        if isinstance(e, os_type):
            return ours(msg, path)
    return _BY_ERRNO.get(e.errno, StoreError)(msg, path)  # type: ignore[arg-type]
