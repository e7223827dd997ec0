"""The storage layer: the only code in dataferry that touches files or object stores."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError
from . import registry
from .base import Store
from .faults import FaultRule, FaultStore, crash_at
from .local.store import LocalStore
from .pool import IOPool, parallel_map
from .sim.profiles import PROFILES, SimProfile
from .sim.store import SimStore
from .types import Capabilities, FileStatus, Op
from .wrapping import WrappingStore

__all__ = [
    "PROFILES",
    "Capabilities",
    "FaultRule",
    "FaultStore",
    "FileStatus",
    "IOPool",
    "LocalStore",
    "Op",
    "SimProfile",
    "SimStore",
    "Store",
    "WrappingStore",
    "crash_at",
    "open_location",
    "open_store",
    "parallel_map",
]


def open_store(
    url_or_path: str | os.PathLike[str],
    *,
    filesystem: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    faults: Iterable[FaultRule] | None = None,
    latency_scale: float = 1.0,
    **options: Any,
) -> Store:
    """Open a store rooted at a URL or path: the only way dataferry reaches storage.

    Parameters
    ----------
    url_or_path
        Its scheme picks one row of the store families' table (`registry.KNOWN`):
        a plain path or ``file://`` (the local store); ``s3://``/``s3a://`` (boto3);
        ``memory://``, ``gs://``, ``abfs://`` (fsspec); ``hdfs://host:port/path`` or
        ``viewfs://`` (hdfs-native); ``sim:PROFILE[:dir]`` (a local directory
        behind a model of another store); or a path inside ``filesystem``.
    filesystem
        An fsspec ``AbstractFileSystem`` or a ``pyarrow.fs.FileSystem``; ``url_or_path`` is
        then a path inside it (a URL only with that file system's scheme). Its capabilities
        come from its protocol or pyarrow type.
    storage_options
        Options as fsspec and Dask take them: fsspec URLs get them as they are; ``s3://``
        takes s3fs's names (key, secret, token, endpoint_url, client_kwargs, config_kwargs,
        anon, profile), given to the boto3 client; ``hdfs://`` takes Hadoop settings
        (hdfs-site.xml's names: ``dfs.client.*``, ``fs.viewfs.mounttable.*``, ...). An unknown one is a ConfigError.
    faults
        Wrap the underlying store in a FaultStore (below any ``sim:`` model, so the model's
        composite operations can be broken half way).
    latency_scale
        Scale a ``sim:`` model's sleeps (0 keeps only its semantics).
    **options
        The store's own options (for ``s3://``: boto3 client options such as endpoint_url).

    Returns
    -------
    Store
        A store rooted at the location; every operation through it is counted and timed.
    """
    if not isinstance(url_or_path, (str, os.PathLike)):
        raise ConfigError(
            "open_store takes a URL or path (str or os.PathLike), not a "
            f"{type(url_or_path).__name__}; a file system object goes as filesystem=, with the "
            "path inside it first, e.g. open_store('bucket/out', filesystem=fs)"
        )
    url = os.fspath(url_or_path)
    if not url:
        raise ConfigError("store URL or path is empty")
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise ConfigError(f"storage_options must be a dict, not {type(storage_options).__name__}")
    fault_rules = tuple(faults) if faults is not None else None
    if filesystem is not None:
        spec = registry.find(url)
        if spec is not None and spec.opaque:
            raise ConfigError(
                f"{url!r}: a {registry.scheme_of(url)}: store is {spec.summary}; it takes no "
                "filesystem="
            )
        if storage_options or options:
            raise ConfigError(
                "storage_options and store options configure a file system that open_store "
                "makes; with filesystem= configure that object instead (got "
                f"{sorted({**(storage_options or {}), **options})})"
            )
        store: Store = registry.store_for_filesystem(filesystem, url)
    else:
        spec = registry.spec_for(url)
        request = registry.StoreRequest(
            url, dict(storage_options or {}), options, fault_rules, latency_scale
        )
        store = spec.open(request)
        if spec.faults_inside:
            return store
    if fault_rules is not None:
        store = FaultStore(store, fault_rules)
    return store


def open_location(
    url_or_path: str | os.PathLike[str], default_name: str, **open_options: Any
) -> tuple[Store, str]:
    """(store, name) for a location that is either a directory (then `default_name` in it)
    or a file (then its parent directory and its name). `open_options` (filesystem=,
    storage_options=, ...) go to `open_store`."""
    from ..errors import NotFound

    url = os.fspath(url_or_path).rstrip("/")
    store = open_store(url, **open_options)
    try:
        if store.stat("").is_dir:
            return store, default_name
    except NotFound:
        pass
    head, sep, name = url.rpartition("/")
    if not sep or not name:
        raise ConfigError(f"{url!r} is neither a directory nor a file path")
    if head.endswith(":/") or head.endswith(":"):  # scheme root such as memory://
        head = head + "/"
    return open_store(head or "/", **open_options), name


def fault_layer(store: Store) -> FaultStore | None:
    """The FaultStore inside a store stack, if there is one."""
    s: Store | None = store
    while s is not None:
        if isinstance(s, FaultStore):
            return s
        s = getattr(s, "inner", None)
    return None
