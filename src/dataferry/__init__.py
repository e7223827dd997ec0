"""dataferry: safe, fast output commit for Python data engines.

The names most users need are here: `open_store`, `make_committer` and `write_dataset`, and
`write_deltalake` (a Delta table written with deltalake's arguments); `open_job` and `Job`
are the job session engines drive their writes through (docs/engines.md).
"""

from __future__ import annotations

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


def __getattr__(name: str) -> Any:
    """The entry points load on first use (`import dataferry` stays light for the CLI), as
    the real functions: `help(dataferry.write_dataset)` shows their signatures."""
    if name == "make_committer":
        from .commit.factory import make_committer

        return make_committer
    if name in ("open_job", "Job"):
        from .commit.job import session

        return getattr(session, name)
    if name == "write_dataset":
        from .dataset.write import write_dataset

        return write_dataset
    if name == "write_deltalake":
        from .dataset.tables import write_deltalake

        return write_deltalake
    raise AttributeError(f"module 'dataferry' has no attribute {name!r}")
