"""Google Cloud Storage through gcsfs: the store (`store`: copy renames, exclusive creates by
`ifGenerationMatch=0`, resumable upload sessions as its uploads) and how a session's parts are
recorded (`sessions`). gcsfs is imported only when a store is made."""

from __future__ import annotations

import sys
from typing import Any

from ..registry import StoreRequest
from .store import GCS_CAPABILITIES, GcsStore

__all__ = ["CAPABILITIES", "GcsStore", "from_filesystem", "open_url"]

CAPABILITIES = {"gs": GCS_CAPABILITIES, "gcs": GCS_CAPABILITIES}


def open_url(request: StoreRequest) -> GcsStore:
    """The store at `gs://bucket/prefix`: storage options and keyword options are gcsfs's
    (`token`, `project`, `endpoint_url`, ...)."""
    return GcsStore(request.url, **{**request.options, **request.storage_options})


def from_filesystem(filesystem: Any, path: str) -> GcsStore | None:
    """The GCS store over a `gcsfs.GCSFileSystem` a user holds; None for any other object."""
    core = sys.modules.get("gcsfs.core")
    if core is None or not isinstance(filesystem, core.GCSFileSystem):
        return None
    return GcsStore(path if "://" in path else f"gs://{path.lstrip('/')}", fs=filesystem)
