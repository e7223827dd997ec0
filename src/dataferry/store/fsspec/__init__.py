"""File systems of other libraries as stores: any fsspec file system (`store`: `memory://`,
`gs://`, `abfs://`, objects users hold) and pyarrow's objects (`arrow`). pyarrow is
imported only when one of its file systems is used."""

from __future__ import annotations

from typing import Any

from fsspec import AbstractFileSystem

from ...errors import ConfigError
from ..registry import StoreRequest
from .store import PROTOCOL_CAPABILITIES, FsspecStore, filesystem_store

__all__ = [
    "ARROW_CAPABILITIES",
    "PROTOCOL_CAPABILITIES",
    "FsspecStore",
    "filesystem_store",
    "from_arrow_filesystem",
    "from_filesystem",
    "open_url",
]


def open_url(request: StoreRequest) -> FsspecStore:
    """The store at an fsspec URL (`memory://`, `gs://`, `abfs://`, ...): storage options and
    keyword options both go to the file system, and may not disagree."""
    options, storage_options = request.options, request.storage_options
    both = sorted(
        k for k in set(options) & set(storage_options) if options[k] != storage_options[k]
    )
    if both:
        raise ConfigError(
            f"store option {both[0]!r} is given twice with different values (as a keyword "
            "and in storage_options)"
        )
    return FsspecStore(request.url, **{**options, **storage_options})


def from_filesystem(filesystem: Any, path: str) -> FsspecStore | None:
    """A store over an fsspec file system object; None for any other object."""
    if not isinstance(filesystem, AbstractFileSystem):
        return None
    return filesystem_store(filesystem, path)


def from_arrow_filesystem(filesystem: Any, path: str) -> FsspecStore | None:
    """A store over a pyarrow file system object (wrapped as fsspec wraps one); None for any
    other object."""
    from .arrow import arrow_store, is_arrow_filesystem

    return arrow_store(filesystem, path) if is_arrow_filesystem(filesystem) else None


def __getattr__(name: str) -> Any:
    if name == "ARROW_CAPABILITIES":  # the pyarrow row's, declared without importing pyarrow
        from .arrow import ARROW_CAPABILITIES

        return ARROW_CAPABILITIES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
