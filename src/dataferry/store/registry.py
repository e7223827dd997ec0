"""Every store family in one declarative table, keyed by URL scheme (as commit/registry.py
keeps the committers, and fsspec's known_implementations its file systems).

A row names the family, the package that holds it, the URL schemes it serves, the function of
that package that opens one of its URLs, the one that takes a file system object a user
already holds (if any), the name of its declared capabilities, and the locations the store
contract suite (tests/store/test_contract.py) opens it at. Nothing is imported until a store of
the family is opened, so `import dataferry.store` costs no boto3 or pyarrow. `open_store` looks
a URL's scheme up here: no module branches on a scheme to choose a store, and a store joins
with one row here and the contract suite.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .base import Store
    from .faults import FaultRule
    from .types import Capabilities


@dataclass(frozen=True)
class StoreRequest:
    """What `open_store` was asked for, handed whole to a family's opener."""

    url: str
    storage_options: Mapping[str, Any]  # fsspec's and Dask's options, as the user gave them
    options: Mapping[str, Any]  # the store's own keyword options
    faults: tuple[FaultRule, ...] | None = None  # for a family that places its fault layer
    latency_scale: float = 1.0  # for the `sim:` models' sleeps


@dataclass(frozen=True)
class StoreSpec:
    name: str
    module: str  # the family's package
    schemes: tuple[str, ...]  # "s3" serves s3://...; "" serves plain paths
    summary: str
    opener: str = "open_url"  # module function: (StoreRequest) -> Store
    capabilities: str = "CAPABILITIES"  # module mapping: scheme, protocol or profile -> caps
    # module function (filesystem object, path inside it) -> Store, or None when the object
    # is not of this family's kind; rows are asked in table order (S3 objects first)
    filesystems: str | None = None
    opaque: bool = False  # URLs are `scheme:rest` (sim:hdfs:/dir), not `scheme://...`
    faults_inside: bool = False  # its opener places the fault layer (sim: below its model)
    forms: tuple[str, ...] = ()  # how its URLs are written in messages, if not `scheme://`
    # (kind, location, capabilities key) for the store contract suite; `{tmp}` is a fresh
    # directory, `{uuid}` a fresh name, `{s3}` a fresh location on the S3 test server (moto),
    # `{seaweed}` one on a real S3 server (SeaweedFS)
    contract: tuple[tuple[str, str, str], ...] = ()
    untested: str = ""  # why the contract suite cannot open it on a test machine

    def package(self) -> Any:
        return importlib.import_module(self.module)

    def open(self, request: StoreRequest) -> Store:
        return getattr(self.package(), self.opener)(request)

    def from_filesystem(self, filesystem: Any, path: str) -> Store | None:
        if self.filesystems is None:
            return None
        return getattr(self.package(), self.filesystems)(filesystem, path)

    def declared_capabilities(self) -> Mapping[str, Capabilities]:
        return getattr(self.package(), self.capabilities)

    def url_forms(self) -> tuple[str, ...]:
        return self.forms or tuple(f"{s}://" if s else "a path" for s in self.schemes)


_PKG = __package__
KNOWN: dict[str, StoreSpec] = {
    s.name: s
    for s in (
        StoreSpec(
            "local",
            f"{_PKG}.local",
            ("", "file"),
            "the local file system: renameat2, whole-file writes renamed into place, no link "
            "followed",
            contract=(("local", "{tmp}/store", "file"),),
        ),
        StoreSpec(
            "s3",
            f"{_PKG}.s3",
            ("s3", "s3a"),
            "Amazon S3 and S3-compatible stores through boto3: multipart uploads, conditional "
            "puts; s3fs's and pyarrow's S3 file system objects too",
            filesystems="from_filesystem",
            contract=(("s3", "{s3}", "s3"), ("s3-seaweedfs", "{seaweed}", "s3")),
        ),
        StoreSpec(
            "sim",
            f"{_PKG}.sim",
            ("sim",),
            "a local directory behind a model of another store (latency, ceilings, rename "
            "semantics, multipart uploads)",
            opaque=True,
            faults_inside=True,
            forms=("sim:PROFILE[:dir]",),
            contract=(
                ("sim-hdfs", "sim:hdfs:{tmp}/store", "hdfs"),
                ("sim-gcs", "sim:gcs:{tmp}/store", "gcs"),
                ("sim-s3", "sim:s3:{tmp}/store", "s3"),
            ),
        ),
        StoreSpec(
            "pyarrow",
            f"{_PKG}.fsspec",
            ("hdfs", "viewfs"),
            "pyarrow file systems: HDFS through HadoopFileSystem (libhdfs, a JVM, Hadoop's "
            "jars), and pyarrow file system objects",
            opener="open_hdfs_url",
            capabilities="ARROW_CAPABILITIES",
            filesystems="from_arrow_filesystem",
            untested="HDFS needs a Hadoop cluster; pyarrow objects: tests/store/test_filesystems.py",
        ),
        StoreSpec(
            "fsspec",
            f"{_PKG}.fsspec",
            ("memory", "gs", "gcs", "abfs", "abfss", "az"),
            "fsspec file systems (memory, GCS, Azure), and fsspec file system objects",
            capabilities="PROTOCOL_CAPABILITIES",
            filesystems="from_filesystem",
            contract=(("memory", "memory://dataferry-tests/{uuid}", "memory"),),
        ),
    )
}


def scheme_of(url: str) -> str:
    """The scheme a URL names a store by: before `://`, or before `:` for an opaque scheme
    of the table (`sim:`); "" for a plain path."""
    if "://" in url:
        return url.split("://", 1)[0]
    head, sep, _ = url.partition(":")
    opaque = {s for spec in KNOWN.values() if spec.opaque for s in spec.schemes}
    return head if sep and head in opaque else ""


def find(url: str) -> StoreSpec | None:
    """The row serving `url`'s scheme, or None."""
    scheme = scheme_of(url)
    return next((spec for spec in KNOWN.values() if scheme in spec.schemes), None)


def spec_for(url: str) -> StoreSpec:
    """The row serving `url`'s scheme; a ConfigError naming the URL and every form served."""
    spec = find(url)
    if spec is None:
        raise ConfigError(f"unsupported store URL {url!r}: use {supported()}")
    return spec


def store_for_filesystem(filesystem: Any, path: str) -> Store:
    """The store over a file system object a user holds: the first row that takes it."""
    for spec in KNOWN.values():
        store = spec.from_filesystem(filesystem, path)
        if store is not None:
            return store
    raise ConfigError(
        "filesystem= takes an fsspec AbstractFileSystem or a pyarrow.fs.FileSystem, not "
        f"{type(filesystem).__name__}; for a URL, pass it alone (or with storage_options=)"
    )


def supported() -> str:
    """Every URL form of the table, for messages."""
    forms = [f for spec in KNOWN.values() for f in spec.url_forms()]
    return (
        f"{', '.join(forms[:-1])} or {forms[-1]} (or a path with filesystem= an fsspec or "
        "pyarrow file system)"
    )


def duplicate_schemes() -> list[str]:
    """Schemes two rows claim (the table's own check; tests/store/test_registry.py)."""
    seen: dict[str, str] = {}
    return [
        f"{s}: {seen[s]} and {spec.name}"
        for spec in KNOWN.values()
        for s in spec.schemes
        if seen.setdefault(s, spec.name) != spec.name
    ]
