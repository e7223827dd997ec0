"""Optional dependencies: import one, or fail with the `pip install` line that brings it.

dataferry's core needs pyarrow, fsspec and the command line's typer and rich; S3, Dask, Ray, the
push shuffle (pyroaring, pandas), the services' TLS (cryptography), the report's plots and the
S3 test server come with extras. `require("distributed", "dask")` imports the module or raises
`MissingDependency`, whose message names the extra (`pip install 'dataferry[dask]'`). The
command line turns any `ModuleNotFoundError` into the same message through `missing_dependency`.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType

from .errors import DataferryError

# the extra (pyproject's optional-dependencies) that installs each optional top-level module;
# a module with no extra of ours is installed by its own name
EXTRA_OF_MODULE = {
    "boto3": "s3",
    "botocore": "s3",
    "s3fs": "s3",
    "gcsfs": "gcs",
    "adlfs": "azure",
    "hdfs_native": "hdfs",
    "azure": "azure",  # azure-storage-blob, azure-storage-file-datalake
    "dask": "dask",
    "distributed": "dask",
    "ray": "ray",
    "daft": "daft",
    "matplotlib": "report",
    "moto": "testserver",
    "pyroaring": "shuffle",
    "pandas": "shuffle",
    "cryptography": "tls",
    "polars": "bench",
    "deltalake": "bench",
    "duckdb": "bench",
    "psutil": "bench",
    "pyspark": "interop",
    "fastavro": "hudi",
}

# pip's name for modules whose distribution is called otherwise
DISTRIBUTION_OF_MODULE = {"moto": "moto[server]", "hdfs_native": "hdfs-native"}


class MissingDependency(DataferryError, ImportError):
    """An optional package is not installed; the message says how to install it."""

    def __init__(self, module: str, needed_by: str = "", detail: str = "") -> None:
        self.module = module.split(".")[0]
        self.extra = EXTRA_OF_MODULE.get(self.module)
        who = f"{needed_by} needs" if needed_by else "needs"
        said = detail and f"No module named '{self.module}'" not in detail  # not twice
        why = f" ({detail})" if said else ""
        super().__init__(
            f"{who} {self.module}, which is not installed{why}: {install_hint(self.module)}",
            name=self.module,
        )


def install_hint(module: str) -> str:
    """The command that installs `module`: the extra that brings it, or the package itself."""
    top = module.split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra:
        return f"pip install 'dataferry[{extra}]'"
    return f"pip install '{DISTRIBUTION_OF_MODULE.get(top, top)}'"


def require(module: str, needed_by: str = "") -> ModuleType:
    """Import `module`, or raise `MissingDependency` naming the extra that installs it.

    `needed_by` names the feature in the message ("the S3 test server", "dataferry.dask")."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = getattr(e, "name", None) or module
        detail = "" if missing.split(".")[0] == module.split(".")[0] else str(e)
        raise MissingDependency(module, needed_by, detail) from e


# fsspec's words for a protocol whose implementation is absent ("Install s3fs to access S3")
_FSSPEC_MISSING = re.compile(r"\binstall (?P<module>[A-Za-z_][\w.-]*) to access\b", re.I)


def missing_dependency(error: ImportError) -> MissingDependency | None:
    """The `MissingDependency` an import error means, when it names a module that is absent
    (by its `name`, or in fsspec's words for a protocol it cannot serve)."""
    if isinstance(error, MissingDependency):
        return error
    if isinstance(error, ModuleNotFoundError) and error.name:
        return MissingDependency(error.name)
    found = _FSSPEC_MISSING.search(str(error))
    if found:
        return MissingDependency(found["module"], detail=str(error))
    return None
