"""Azure Blob Storage (`abfs://`, `abfss://`, `az://`) through adlfs and Azure's own clients:
capabilities read from the account (a Blob account renames by copy; a hierarchical namespace
renames atomically through the Data Lake API), exclusive creates, and multipart uploads as
block lists. adlfs and azure-storage-blob are imported only when a store is made."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ...extras import require
from ..registry import StoreRequest

__all__ = ["CAPABILITIES", "from_filesystem", "open_url"]


def __getattr__(name: str) -> Any:
    if name == "CAPABILITIES":  # declared without importing adlfs
        from .store import BLOB_CAPABILITIES, HNS_CAPABILITIES

        return {"abfs": BLOB_CAPABILITIES, "abfs-hns": HNS_CAPABILITIES}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_url(request: StoreRequest) -> Any:
    """The store at `abfs://container/path`: storage options in adlfs's names
    (`connection_string`, `account_name`, `account_key`, `sas_token`, ...), as keywords or in
    storage_options (not both, differently)."""
    require("adlfs", "abfs://")
    require("azure.storage.blob", "abfs://")
    from .store import AzureStore

    options, storage_options = request.options, request.storage_options
    both = sorted(
        k for k in set(options) & set(storage_options) if options[k] != storage_options[k]
    )
    if both:
        raise ConfigError(
            f"store option {both[0]!r} is given twice with different values (as a keyword "
            "and in storage_options)"
        )
    return AzureStore(request.url, **{**options, **storage_options})


def from_filesystem(filesystem: Any, path: str) -> Any:
    """An adlfs AzureBlobFileSystem object a user holds, as the Azure store with its options
    (its connection string or account credentials); None for any other object."""
    if type(filesystem).__name__ != "AzureBlobFileSystem":
        return None
    from .store import AzureStore

    options = {
        k: getattr(filesystem, k)
        for k in ("connection_string", "account_name", "account_key", "sas_token")
        if getattr(filesystem, k, None)
    }
    url = path if "://" in path else f"abfs://{path.lstrip('/')}"
    return AzureStore(url, **options)
