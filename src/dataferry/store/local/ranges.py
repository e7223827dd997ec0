"""A local store's file kept open for many ranges (`LocalStore.range_reader`) or many writes
at offsets (`LocalStore.positional_writer`).

A shuffle's reducer reads one small block from each of a hundred map outputs, and the next
reducer the next block of the same files: opening the file for every block cost more than
reading it (on a busy 2-core machine, a 1 GiB shuffle's reduces spent a third of their read
time opening and closing). The local store opens the file once (no link followed, as every
local open is) and this reads it by offset; any other store reads each range as `read_range`
does (`base.RangeReader`). A shuffle service likewise writes each merged block (or stub) at the
end of its partition's file: opening the file for every write cost 11.9 us a block in one
process, against 0.7 us for a write to the file kept open.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..base import PositionalWriter, RangeReader, Store
from ..types import Op


class OpenFileRanges(RangeReader):
    """Ranges of a local file opened once by `open_file(path, "read", flags)` (NotFound or
    LinkRefused there, as a read's), read by offset; a read's OSError is raised as
    `translate(error, path, "read")` makes it. `close` closes the file."""

    def __init__(
        self,
        store: Store,
        path: str,
        open_file: Callable[[str, str, int], int],
        translate: Callable[[OSError, str, str], Exception],
    ) -> None:
        super().__init__(store, path)
        self._translate = translate
        self.fd = store._op(Op.READ, self.path, open_file, self.path, "read", os.O_RDONLY)

    def read(self, start: int, length: int) -> bytes:
        if self.fd < 0:
            raise ValueError(f"{self.store.full_url(self.path)}: read after close")
        try:
            return self.store._op(Op.READ_RANGE, self.path, os.pread, self.fd, length, start)
        except OSError as e:
            raise self._translate(e, self.path, "read") from None

    def read_into(self, start: int, view: memoryview) -> int:
        """`os.preadv` into the caller's buffer (again after a short read, until the end of
        the file): no bytes object per read, so a reader that keeps its buffers in a pool
        reuses their pages (see `shuffle/open_outputs.py`)."""
        return self.preadv_into(start, view, self._counted_preadv)

    def _counted_preadv(self, fd: int, buffers: list[memoryview], offset: int) -> int:
        return self.store._op(Op.READ_RANGE, self.path, os.preadv, fd, buffers, offset)

    def preadv_into(
        self, start: int, view: memoryview, preadv: Callable[[int, list[memoryview], int], int]
    ) -> int:
        """`view` filled from `start` by `preadv` calls (again after a short read, until the
        end of the file); the bytes read."""
        if self.fd < 0:
            raise ValueError(f"{self.store.full_url(self.path)}: read after close")
        got = 0
        try:
            while got < len(view):
                n = preadv(self.fd, [view[got:]], start + got)
                if n == 0:
                    break
                got += n
        except OSError as e:
            raise self._translate(e, self.path, "read") from None
        return got

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


class OpenFileWriter(PositionalWriter):
    """Writes at offsets of a local file opened once by `open_file(path, "write", flags)`
    (created if absent, no link followed); a write's OSError is raised as
    `translate(error, path, "write")` makes it. `close` closes the file."""

    def __init__(
        self,
        store: Store,
        path: str,
        open_file: Callable[..., int],
        translate: Callable[[OSError, str, str], Exception],
    ) -> None:
        super().__init__(store, path)
        self._translate = translate
        self.fd = open_file(self.path, "write", os.O_WRONLY | os.O_CREAT, True)

    def write_at(self, offset: int, data: bytes | memoryview) -> None:
        if self.fd < 0:
            raise ValueError(f"{self.store.full_url(self.path)}: write after close")
        self.store._op(Op.WRITE_AT, self.path, self._write, offset, memoryview(data))

    def _write(self, offset: int, view: memoryview) -> None:
        try:
            while view:
                n = os.pwrite(self.fd, view, offset)
                view, offset = view[n:], offset + n
        except OSError as e:
            raise self._translate(e, self.path, "write") from None

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def _read_all_into(reads: Sequence[tuple[OpenFileRanges, int, memoryview]]) -> list[int]:
    """`OpenFileRanges.read_into` of each, without a store operation apiece."""
    return [reader.preadv_into(start, view, os.preadv) for reader, start, view in reads]


class KeptOpen:
    """A local store's files kept open (mixed into `LocalStore`, whose `_open_file` and
    `_translate` they use): `range_reader`, `positional_writer` and `read_ranges_into`."""

    def read_ranges_into(
        self: Any, reads: Sequence[tuple[RangeReader, int, memoryview]]
    ) -> list[int]:
        """Ranges of files kept open (`range_reader`'s), read as one operation of this store:
        a reducer reads one block from each of a hundred map outputs, and a store operation
        apiece (its timing and statistics) cost more than the `preadv` itself. Other readers
        are read one by one, as any store reads them."""
        if all(isinstance(r, OpenFileRanges) for r, _, _ in reads):
            where = reads[0][0].path if reads else ""
            return self._op(Op.READ_RANGE, where, _read_all_into, reads)
        return super().read_ranges_into(reads)

    def range_reader(self: Any, path: str) -> OpenFileRanges:
        """The file opened once (no link followed) and read by offset."""
        return OpenFileRanges(self, path, self._open_file, self._translate)

    def positional_writer(self: Any, path: str) -> OpenFileWriter:
        """The file opened once (created, no link followed) and written at offsets."""
        return OpenFileWriter(self, path, self._open_file, self._translate)
