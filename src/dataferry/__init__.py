"""dataferry: safe, fast output commit for Python data engines.

The names most users need are here: `open_store`, `make_committer` and `write_dataset`.
"""

from __future__ import annotations

from typing import Any

from .store import open_store

__version__ = "0.1.0"

__all__ = ["__version__", "make_committer", "open_store", "write_dataset"]


def make_committer(name: str, dest: Any, **options: Any):
    """A committer by name (`v1`, `v2`, `manifest`, ..., or `auto`) for a destination
    (a URL, a path or an open Store)."""
    from .commit.factory import make_committer as _make

    return _make(name, dest, **options)


def write_dataset(data: Any, dest: Any, **kwargs: Any):
    """Write a pyarrow Table (or tables/batches) as a committed, partitioned data set."""
    from .dataset.write import write_dataset as _write

    return _write(data, dest, **kwargs)
