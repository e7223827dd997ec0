"""The local file system store (plain paths and `file://` URLs): the store itself (`store`),
its descriptor-level file helpers (`files`), directory opens that follow no link (`nofollow`)
and a file kept open for many ranges (`ranges`)."""

from __future__ import annotations

from ...errors import ConfigError
from ..registry import StoreRequest
from .store import LOCAL_CAPABILITIES, LocalStore

__all__ = ["CAPABILITIES", "LOCAL_CAPABILITIES", "LocalStore", "open_url"]

CAPABILITIES = {"file": LOCAL_CAPABILITIES}


def open_url(request: StoreRequest) -> LocalStore:
    """The local store at a path or `file://` URL. fsspec's `auto_mkdir` is accepted (this
    store always makes parent directories); any other storage option is refused by name."""
    extra = sorted(k for k in request.storage_options if k != "auto_mkdir")
    if extra:
        raise ConfigError(
            f"the local store at {request.url!r} takes no storage option {extra[0]!r}"
        )
    return LocalStore(request.url)
