"""The local file system store (plain paths and `file://` URLs): the store itself (`store`),
its descriptor-level file helpers (`files`), directory opens that follow no link (`nofollow`)
and a file kept open for many ranges (`ranges`)."""

from .store import LOCAL_CAPABILITIES, LocalStore

__all__ = ["LOCAL_CAPABILITIES", "LocalStore"]
