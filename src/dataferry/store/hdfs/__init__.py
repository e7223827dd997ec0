"""HDFS through hdfs-native (`hdfs://namenode:port/path`, `viewfs://cluster/path`): the store
(`store`) and its client (`client`). hdfs-native is imported only when a store is used; a
pyarrow HadoopFileSystem object handed in is served by the pyarrow row (store.fsspec.arrow)."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ..registry import StoreRequest
from .store import HDFS_CAPABILITIES, HdfsStore

__all__ = ["CAPABILITIES", "HdfsStore", "from_filesystem", "open_url"]

CAPABILITIES = {"hdfs": HDFS_CAPABILITIES, "viewfs": HDFS_CAPABILITIES}


def open_url(request: StoreRequest) -> HdfsStore:
    """The store at an `hdfs://` or `viewfs://` URL; storage options and keyword options are
    Hadoop settings for the client (`dfs.client.*`, `hadoop.security.authentication`, ...),
    and may not disagree."""
    options, storage = request.options, request.storage_options
    both = sorted(k for k in set(options) & set(storage) if options[k] != storage[k])
    if both:
        raise ConfigError(
            f"HDFS setting {both[0]!r} is given twice with different values (as a keyword "
            "and in storage_options)"
        )
    return HdfsStore(request.url, {**options, **storage})


def from_filesystem(filesystem: Any, path: str) -> HdfsStore | None:
    """The store over hdfs-native's own fsspec file system (`HdfsFileSystem`,
    `ViewfsFileSystem`), at `path` inside it; None for any other object."""
    if type(filesystem).__module__ != "hdfs_native.fsspec":
        return None
    scheme = filesystem.protocol if isinstance(filesystem.protocol, str) else filesystem.protocol[0]
    authority = filesystem.host or ""
    if authority and filesystem.port:
        authority += f":{filesystem.port}"
    inside = filesystem._strip_protocol(path)
    if "://" in path and not path.startswith(f"{scheme}://"):
        raise ConfigError(
            f"filesystem= is hdfs-native's {type(filesystem).__name__} and {path!r} has another "
            f"scheme: pass a path inside it (open_store({inside!r}, filesystem=fs))"
        )
    config = {k: v for k, v in filesystem.storage_options.items() if isinstance(v, str)}
    return HdfsStore(f"{scheme}://{authority}/{inside.lstrip('/')}", config)
