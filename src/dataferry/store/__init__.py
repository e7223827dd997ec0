"""The storage layer: the only code in dataferry that touches files or object stores."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError
from .base import Store
from .faults import FaultRule, FaultStore, crash_at
from .local.store import LocalStore
from .pool import IOPool, parallel_map
from .sim.profiles import PROFILES, SimProfile, parse_sim_url
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

FSSPEC_SCHEMES = ("memory", "gs", "gcs", "abfs", "abfss", "az")
HDFS_SCHEMES = ("hdfs", "viewfs")
_SUPPORTED = (
    "a path, file://, memory://, s3://, gs://, abfs://, hdfs://, viewfs:// or "
    "sim:PROFILE[:dir] (or a path with filesystem= an fsspec or pyarrow file system)"
)


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
        A plain path or ``file://`` (the local store); ``s3://``/``s3a://`` (boto3);
        ``memory://``, ``gs://``, ``abfs://`` (fsspec); ``hdfs://host:port/path`` or
        ``viewfs://`` (pyarrow's HadoopFileSystem); ``sim:PROFILE[:dir]`` (a local directory
        behind a model of another store); or a path inside ``filesystem``.
    filesystem
        An fsspec ``AbstractFileSystem`` or a ``pyarrow.fs.FileSystem``; ``url_or_path`` is
        then a path inside it (a URL only with that file system's scheme). Its capabilities
        come from its protocol or pyarrow type.
    storage_options
        Options as fsspec and Dask take them: fsspec URLs get them as they are; ``s3://``
        takes s3fs's names (key, secret, token, endpoint_url, client_kwargs, config_kwargs,
        anon, profile), given to the boto3 client; ``hdfs://`` takes HadoopFileSystem's
        (user, kerb_ticket, replication, extra_conf, ...). An unknown one is a ConfigError.
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
    if _filesystem_kind(url_or_path):
        raise ConfigError(
            f"open_store got a file system object ({type(url_or_path).__name__}) where the URL "
            "or path belongs: pass it as filesystem= and the path inside it first, e.g. "
            "open_store('bucket/out', filesystem=fs)"
        )
    url = os.fspath(url_or_path)
    if not url:
        raise ConfigError("store URL or path is empty")
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise ConfigError(f"storage_options must be a dict, not {type(storage_options).__name__}")
    fault_rules = list(faults) if faults is not None else None
    if filesystem is not None:
        if url.startswith("sim:"):
            raise ConfigError(
                f"{url!r}: a sim: store models a store over a local directory; it takes no "
                "filesystem="
            )
        if storage_options or options:
            raise ConfigError(
                "storage_options and store options configure a file system that open_store "
                "makes; with filesystem= configure that object instead (got "
                f"{sorted({**(storage_options or {}), **options})})"
            )
        store: Store = _filesystem_store(filesystem, url)
    elif url.startswith("sim:"):
        if storage_options:
            raise ConfigError(
                f"{url!r}: a sim: store is a local directory; it takes no storage_options"
            )
        profile, directory = parse_sim_url(url)
        base: Store = LocalStore(directory)
        if fault_rules is not None:
            base = FaultStore(base, fault_rules)
        return SimStore(profile, base, latency_scale=latency_scale)
    else:
        store = _url_store(url, dict(storage_options or {}), options)
    if fault_rules is not None:
        store = FaultStore(store, fault_rules)
    return store


def _url_store(url: str, storage_options: dict[str, Any], options: dict[str, Any]) -> Store:
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme in ("", "file"):
        extra = sorted(k for k in storage_options if k != "auto_mkdir")  # ours always does
        if extra:
            raise ConfigError(f"the local store at {url!r} takes no storage option {extra[0]!r}")
        return LocalStore(url)
    if scheme in ("s3", "s3a"):
        from .s3.store import S3Store

        return S3Store(url, storage_options=storage_options, **options)
    if scheme in FSSPEC_SCHEMES:
        from .fsspec.store import FsspecStore

        both = sorted(
            k for k in set(options) & set(storage_options) if options[k] != storage_options[k]
        )
        if both:
            raise ConfigError(
                f"store option {both[0]!r} is given twice with different values (as a keyword "
                "and in storage_options)"
            )
        return FsspecStore(url, **{**options, **storage_options})
    if scheme in HDFS_SCHEMES:
        from .fsspec.arrow import hadoop_store

        if options:
            raise ConfigError(
                f"{url!r}: give HDFS options as storage_options, not keywords ({sorted(options)})"
            )
        return hadoop_store(url, storage_options)
    raise ConfigError(f"unsupported store URL {url!r}: use {_SUPPORTED}")


def _filesystem_kind(obj: Any) -> str | None:
    """ "fsspec" or "pyarrow" for a file system object, else None."""
    from fsspec import AbstractFileSystem

    if isinstance(obj, AbstractFileSystem):
        return "fsspec"
    from .fsspec.arrow import is_arrow_filesystem

    return "pyarrow" if is_arrow_filesystem(obj) else None


def _filesystem_store(filesystem: Any, url: str) -> Store:
    from .s3 import objects as s3_objects

    # S3 objects, s3fs's or pyarrow's, reach the one S3 store, with its multipart uploads
    if s3_objects.is_s3fs(filesystem):
        from .s3.store import S3Store

        options = s3_objects.s3fs_storage_options(filesystem)
        return S3Store(s3_objects.s3_url(url), storage_options=options)
    if s3_objects.is_arrow_s3(filesystem):
        from .s3.store import S3Store

        options = s3_objects.arrow_s3_storage_options(filesystem)
        return S3Store(s3_objects.s3_url(url), storage_options=options)
    kind = _filesystem_kind(filesystem)
    if kind == "pyarrow":
        from .fsspec.arrow import arrow_store

        return arrow_store(filesystem, url)
    if kind == "fsspec":
        from .fsspec.store import filesystem_store

        return filesystem_store(filesystem, url)
    raise ConfigError(
        "filesystem= takes an fsspec AbstractFileSystem or a pyarrow.fs.FileSystem, not "
        f"{type(filesystem).__name__}; for a URL, pass it alone (or with storage_options=)"
    )


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
