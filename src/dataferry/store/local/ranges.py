"""A local store's file kept open for many ranges (`LocalStore.range_reader`).

A shuffle's reducer reads one small block from each of a hundred map outputs, and the next
reducer the next block of the same files: opening the file for every block cost more than
reading it (on a busy 2-core machine, a 1 GiB shuffle's reduces spent a third of their read
time opening and closing). The local store opens the file once (no link followed, as every
local open is) and this reads it by offset; any other store reads each range as `read_range`
does (`base.RangeReader`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..base import RangeReader, Store
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
        if self.fd < 0:
            raise ValueError(f"{self.store.full_url(self.path)}: read after close")
        got = 0
        try:
            while got < len(view):
                n = self.store._op(
                    Op.READ_RANGE, self.path, os.preadv, self.fd, [view[got:]], start + got
                )
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
