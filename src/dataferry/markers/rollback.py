"""Rolling a job back from its markers alone, whichever kind wrote them: direct marker files and
the service's `MARKERS<i>` files are both read straight from the store (no service needed)."""

from __future__ import annotations

from ..store import IOPool, Store
from .base import data_path
from .direct import DirectMarkers
from .files import read_marker_files


def markers_in(store: Store, directory: str) -> set[str]:
    found = {m for names in read_marker_files(store, directory).values() for m in names}
    return found | DirectMarkers(store, directory).all()


def rollback(store: Store, directory: str, threads: int = 32) -> int:
    """Delete every data file the directory's markers name, then the markers; returns files
    deleted."""
    doomed = sorted({data_path(m) for m in markers_in(store, directory)})
    with IOPool(threads) as pool:
        deleted = sum(pool.map(store.delete, doomed, adaptive=True))
    store.delete(directory, recursive=True)
    return deleted
