"""Direct markers: one empty file per marker, through the store, one request each and one
after another (as Hudi creates them): a burst of parallel creates only meets the store's
request ceiling sooner.

With `batch`, the markers of the files an attempt announces before writing them (one per
partition it writes) are one file instead, `BATCH-<random hex>` in the job's marker directory,
holding their names one a line: made whole or not at all (`create_if_absent`), and never
changed after, before any of those files is written. On a store with real directories a
small append's markers then cost one file, not a directory per partition made and removed
again. Readers take a batch's names as markers like the others (`all`, `batch_names`)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

from ..store import IOPool, Store, paths
from ..store.walk import parallel_walk
from .base import MARKER_EXTN, IOType, WriteMarkers, check_marker_name, marker_name

BATCH_PREFIX = "BATCH-"
_BATCH = re.compile(r"BATCH-[0-9a-f]{32}")


def is_batch(name: str) -> bool:
    """Whether a file of a marker directory (by its name) is a batch of markers."""
    return _BATCH.fullmatch(name) is not None


def batch_names(store: Store, path: str) -> set[str]:
    """The marker names a batch file holds (only whole lines: it is written whole)."""
    lines = store.read_bytes(path).decode("utf-8", errors="replace").split("\n")[:-1]
    return {check_marker_name(n) for n in lines if n}


def names_in(store: Store, directory: str, files: Sequence[str]) -> set[str]:
    """The marker names that `files` (found under a job's marker directory) hold: a marker
    file's own name, each name a batch file lists; other files hold none."""
    names: set[str] = set()
    for path in files:
        name = paths.name(path)
        if MARKER_EXTN + "." in name:
            names.add(paths.relative_to(path, directory))
        elif is_batch(name):
            names |= batch_names(store, path)
    return names


class DirectMarkers(WriteMarkers):
    def __init__(
        self, store: Store, directory: str, threads: int = 32, batch: bool = False
    ) -> None:
        self.store = store
        self.directory = paths.normalize(directory)
        self.threads = threads
        self.batches = batch

    def __reduce__(self):
        return (DirectMarkers, (self.store, self.directory, self.threads, self.batches))

    def create(self, partition: str, file_name: str, io_type: IOType = IOType.CREATE) -> bool:
        return self.store.create_if_absent(
            paths.join(self.directory, marker_name(partition, file_name, io_type))
        )

    def create_many(
        self, files: Sequence[tuple[str, str]], io_type: IOType = IOType.CREATE
    ) -> list[bool]:
        """One batch file naming every marker (with `batch`; else one file per marker)."""
        if not self.batches or not files:
            return super().create_many(files, io_type)
        names = [check_marker_name(marker_name(p, n, io_type)) for p, n in files]
        batch = paths.join(self.directory, f"{BATCH_PREFIX}{uuid.uuid4().hex}")
        self.store.create_if_absent(batch, "".join(f"{n}\n" for n in names).encode())
        return [True] * len(names)

    def all(self) -> set[str]:
        with IOPool(self.threads) as pool:
            found = parallel_walk(self.store, self.directory, pool)
        return names_in(self.store, self.directory, [s.path for s in found])

    def delete_all(self) -> None:
        self.store.delete(self.directory, recursive=True)
