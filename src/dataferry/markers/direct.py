"""Direct markers: one empty file per marker, through the store, one request each and one
after another (as Hudi creates them): a burst of parallel creates only meets the store's
request ceiling sooner."""

from __future__ import annotations

from ..store import IOPool, Store, paths
from ..store.walk import parallel_walk
from .base import MARKER_EXTN, IOType, WriteMarkers, marker_name


class DirectMarkers(WriteMarkers):
    def __init__(self, store: Store, directory: str, threads: int = 32) -> None:
        self.store = store
        self.directory = paths.normalize(directory)
        self.threads = threads

    def __reduce__(self):
        return (DirectMarkers, (self.store, self.directory, self.threads))

    def create(self, partition: str, file_name: str, io_type: IOType = IOType.CREATE) -> bool:
        return self.store.create_if_absent(
            paths.join(self.directory, marker_name(partition, file_name, io_type))
        )

    def all(self) -> set[str]:
        with IOPool(self.threads) as pool:
            found = parallel_walk(self.store, self.directory, pool)
        return {
            paths.relative_to(s.path, self.directory) for s in found if MARKER_EXTN + "." in s.name
        }

    def delete_all(self) -> None:
        self.store.delete(self.directory, recursive=True)
