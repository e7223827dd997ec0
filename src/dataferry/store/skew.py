"""`ClockSkewStore`: the same files, seen through a store whose clock differs from ours.

A store stamps each file with its own clock, and dataferry judges a claim's age by that clock
alone (`commit/records/lease.py`). To check that a process whose wall clock is off never
mistakes a live holder for a dead one, its store is wrapped here: every modification time it
reports is shifted by `offset_s` (negative: the store's clock is behind ours, which is our
clock running ahead of it), while what the files hold is untouched.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Store
from .types import FileStatus
from .wrapping import WrappingStore


class ClockSkewStore(WrappingStore):
    """Reports every file's modification time `offset_s` seconds off (see the module)."""

    def __init__(self, inner: Store, offset_s: float) -> None:
        super().__init__(inner)
        self.offset_s = float(offset_s)

    def _shift(self, st: FileStatus) -> FileStatus:
        return st if st.mtime is None else replace(st, mtime=st.mtime + self.offset_s)

    def _stat(self, path: str) -> FileStatus:
        return self._shift(self.inner.stat(path))

    def _list(self, path: str) -> list[FileStatus]:
        return [self._shift(st) for st in self.inner.list(path)]

    def _walk(self, path: str) -> list[FileStatus]:
        return [self._shift(st) for st in self.inner.walk(path)]
