"""Amazon S3 and S3-compatible stores through boto3: the store (`store`), how its client is
made (`client`), and s3fs's or pyarrow's S3 file system objects turned into its options
(`objects`). boto3 is imported only when a store is made."""

from __future__ import annotations

from typing import Any

from ..registry import StoreRequest
from . import objects
from .store import MIN_PART_SIZE, S3_CAPABILITIES, S3Store

__all__ = ["CAPABILITIES", "MIN_PART_SIZE", "S3Store", "from_filesystem", "open_url"]

CAPABILITIES = {"s3": S3_CAPABILITIES}


def open_url(request: StoreRequest) -> S3Store:
    """The store at `s3://bucket/prefix` (or `s3a://`): storage options in s3fs's names,
    options as boto3 client options."""
    return S3Store(request.url, storage_options=request.storage_options, **request.options)


def from_filesystem(filesystem: Any, path: str) -> S3Store | None:
    """The one S3 store, with its multipart uploads, for an `s3fs.S3FileSystem` or a
    `pyarrow.fs.S3FileSystem` (built from the object's endpoint and credentials); None for
    any other object."""
    if objects.is_s3fs(filesystem):
        options = objects.s3fs_storage_options(filesystem)
    elif objects.is_arrow_s3(filesystem):
        options = objects.arrow_s3_storage_options(filesystem)
    else:
        return None
    return S3Store(objects.s3_url(path), storage_options=options)
