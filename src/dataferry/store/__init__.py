"""The storage layer: the only code in dataferry that touches files or object stores."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ..errors import ConfigError
from .base import Capabilities, FileStatus, Op, Store, WrappingStore
from .faults import FaultRule, FaultStore, crash_at
from .local import LocalStore
from .pool import IOPool, parallel_map
from .sim import PROFILES, SimProfile, SimStore, parse_sim_url

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


def open_store(
    url_or_path: str | os.PathLike[str],
    *,
    faults: Iterable[FaultRule] | None = None,
    latency_scale: float = 1.0,
    **options: Any,
) -> Store:
    """Open a store rooted at a URL or path.

    Plain paths and `file://` give the local store; `s3://` the S3 store (boto3; options are
    client options such as endpoint_url); `memory://`, `gs://`, `abfs://` go through fsspec
    (options are its storage options); `sim:PROFILE[:dir]` gives a local
    directory behind a model of another store. `faults` wraps the underlying store in a
    FaultStore (below any `sim:` model, so the model's composite operations can be broken
    half way). `latency_scale` scales a `sim:` model's sleeps (0 keeps only its semantics).
    """
    url = os.fspath(url_or_path)
    if not url:
        raise ConfigError("store URL or path is empty")
    fault_rules = list(faults) if faults is not None else None
    if url.startswith("sim:"):
        profile, directory = parse_sim_url(url)
        base: Store = LocalStore(directory)
        if fault_rules is not None:
            base = FaultStore(base, fault_rules)
        return SimStore(profile, base, latency_scale=latency_scale)
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme in ("", "file"):
        store: Store = LocalStore(url)
    elif scheme in ("s3", "s3a"):
        from .s3 import S3Store

        store = S3Store(url, **options)
    elif scheme in FSSPEC_SCHEMES:
        from .fsspec_store import FsspecStore

        store = FsspecStore(url, **options)
    else:
        raise ConfigError(
            f"unsupported store URL {url!r}: use a path, file://, memory://, s3://, gs://, "
            "abfs:// or sim:PROFILE[:dir]"
        )
    if fault_rules is not None:
        store = FaultStore(store, fault_rules)
    return store


def open_location(url_or_path: str | os.PathLike[str], default_name: str) -> tuple[Store, str]:
    """(store, name) for a location that is either a directory (then `default_name` in it)
    or a file (then its parent directory and its name)."""
    from ..errors import NotFound

    url = os.fspath(url_or_path).rstrip("/")
    store = open_store(url)
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
    return open_store(head or "/"), name


def fault_layer(store: Store) -> FaultStore | None:
    """The FaultStore inside a store stack, if there is one."""
    s: Store | None = store
    while s is not None:
        if isinstance(s, FaultStore):
            return s
        s = getattr(s, "inner", None)
    return None
