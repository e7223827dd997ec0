"""Every marker of a job, whichever kind wrote them: direct marker files and the service's
`MARKERS<i>` files are both read straight from the store (no service needed), so a job can be
rolled back with the service down. What a marker names is only deleted by the committers, and
only when `ownership` says the job wrote it."""

from __future__ import annotations

from ..store import Store
from .direct import DirectMarkers
from .files import read_marker_files


def markers_in(store: Store, directory: str) -> set[str]:
    found = {m for names in read_marker_files(store, directory).values() for m in names}
    return found | DirectMarkers(store, directory).all()
