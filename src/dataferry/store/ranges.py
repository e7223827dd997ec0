"""Many ranges of one file, read one after another.

A shuffle's reducer reads one small block from each of a hundred map outputs, and the next
reducer the next block of the same files: opening the file for every block cost more than
reading it (on a busy 2-core machine, a 1 GiB shuffle's reduces spent a third of their read
time opening and closing). `range_reader` keeps a local store's file open between reads (opened
once, no link followed, as every local open is); any other store reads each range as
`read_range` does, so a wrapping store (faults, latency) still sees every read.
"""

from __future__ import annotations

import os

from . import paths
from .base import Store
from .local import LocalStore
from .types import Op


class RangeReader:
    """Reads ranges of one file of a store; `close` when done (a no-op here)."""

    def __init__(self, store: Store, path: str) -> None:
        self.store, self.path = store, paths.normalize(path)

    def read(self, start: int, length: int) -> bytes:
        """`length` bytes from `start` (fewer at the end of the file), as `read_range`."""
        return self.store.read_range(self.path, start, length)

    def close(self) -> None:
        pass


class _OpenFile(RangeReader):
    """A local store's file, opened once: NotFound or LinkRefused at the open, as a read's."""

    def __init__(self, store: LocalStore, path: str) -> None:
        super().__init__(store, path)
        self.local = store
        self.fd = store._op(Op.READ, self.path, store._open_file, self.path, "read", os.O_RDONLY)

    def read(self, start: int, length: int) -> bytes:
        if self.fd < 0:
            raise ValueError(f"{self.store.full_url(self.path)}: read after close")
        try:
            return self.local._op(Op.READ_RANGE, self.path, os.pread, self.fd, length, start)
        except OSError as e:
            raise self.local._translate(e, self.path, "read") from None

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def range_reader(store: Store, path: str) -> RangeReader:
    """A reader of ranges of `path`: the file kept open on a local store, else per range."""
    if isinstance(store, LocalStore):
        return _OpenFile(store, path)
    return RangeReader(store, path)
