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


def exists_refusal(e: BaseException) -> bool:
    """An exclusive create refused because the file exists: FileExistsError, or s3fs's
    OSError(EINVAL) for an S3 412 PreconditionFailed (s3fs makes FileExistsError of a 412 only
    when the answer names the If-None-Match condition, as AWS's does; SeaweedFS's and other
    servers' do not). s3fs's only conditional requests are If-None-Match creates, so a 412
    under it means the object is there."""
    if isinstance(e, FileExistsError):
        return True
    if not isinstance(e, OSError) or e.errno != errno.EINVAL:
        return False
    cause = e.__cause__
    answer = getattr(cause, "response", None)
    if not isinstance(answer, dict):
        return False
    code = str(answer.get("Error", {}).get("Code", ""))
    status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code == "PreconditionFailed" or status == 412


def from_os_error(e: OSError, msg: str, path: str) -> StoreError:
    """The StoreError for `e`, carrying `msg` and the store-relative `path`."""
    if exists_refusal(e):
        return AlreadyExists(msg, path)
    for os_type, ours in _BY_TYPE:
        if isinstance(e, os_type):
            return ours(msg, path)
    return _BY_ERRNO.get(e.errno, StoreError)(msg, path)  # type: ignore[arg-type]
