"""dataferry: safe, fast output commit for Python data engines.

The names most users need are here: `open_store`, `make_committer` and `write_dataset`, and
`write_deltalake` (a Delta table written with deltalake's arguments); `open_job` and `Job`
are the job session engines drive their writes through (docs/engines.md).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from .store import open_store

# silent by default: a library's warnings reach the application's handlers, never stderr
logging.getLogger("dataferry").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "Job",
    "__version__",
    "make_committer",
    "open_job",
    "open_store",
    "write_dataset",
    "write_deltalake",
]


# name -> the module defining it: loaded on first use (`import dataferry` stays light for the
# CLI), as the real functions, so `help(dataferry.write_dataset)` shows their signatures
_LAZY = {
    "Job": "dataferry.commit.job.session",
    "make_committer": "dataferry.commit.factory",
    "open_job": "dataferry.commit.job.session",
    "write_dataset": "dataferry.dataset.write",
    "write_deltalake": "dataferry.dataset.tables",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dataferry' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    """The loaded names and the lazy ones (loading none): what IPython and `dir()` offer."""
    return sorted(set(globals()) | set(_LAZY))
