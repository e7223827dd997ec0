"""A merged partition's data file kept open for its writes: one open for all its blocks,
closed at finalize, discard and removal, and a bound on how many stay open (past it a
partition's file is opened for each write, as before)."""

from __future__ import annotations

import os

from pyroaring import BitMap

from dataferry.shuffle import MergeManager, PushCode, frame
from dataferry.shuffle import merge as merge_module
from dataferry.shuffle.files import merged_files
from dataferry.store import LocalStore

APP = "app-1"


def block(m: int, r: int, n: int = 100) -> bytes:
    return frame(m, r, bytes([m % 256]) * n)


class CountingStore(LocalStore):
    """A local store that notes every path it opens a file of."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.opened: list[str] = []

    def _open_file(self, path: str, what: str, flags: int, create: bool = False) -> int:
        self.opened.append(path)
        return super()._open_file(path, what, flags, create)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_partitions_blocks_are_written_through_one_open_of_its_file(tmp_path):
    store = CountingStore(str(tmp_path))
    merges = MergeManager(store)
    for m in range(20):
        assert merges.push(APP, 0, 1, m, 3, block(m, 3)) == PushCode.SUCCESS
    data = merged_files(APP, 0, 1, 3)[0]
    assert store.opened.count(data) == 1
    [status] = merges.finalize(APP, 0, 1)
    assert status.bitmap == BitMap(range(20))
    assert store.read_bytes(data) == b"".join(block(m, 3) for m in range(20))


def test_kept_files_are_closed_at_finalize_discard_and_removal(tmp_path):
    merges = MergeManager(LocalStore(str(tmp_path)))
    before = open_fds()
    for r in range(5):
        merges.push(APP, 0, 1, 0, r, block(0, r))
    assert open_fds() == before + 5
    merges.finalize(APP, 0, 1)
    assert open_fds() == before
    for r in range(5):
        merges.push(APP, 1, 1, 0, r, block(0, r))
    merges.push(APP, 1, 2, 0, 0, block(0, 0))  # a newer merge discards the older one
    assert open_fds() == before + 1
    merges.remove(APP, 1)
    assert open_fds() == before
    for r in range(3):
        merges.push(APP, 2, 1, 0, r, block(0, r))
    merges.remove_app(APP)
    assert open_fds() == before


def test_past_the_bound_a_partition_opens_its_file_for_each_write(tmp_path, monkeypatch):
    monkeypatch.setattr(merge_module, "OPEN_WRITERS", 1)
    store = CountingStore(str(tmp_path))
    merges = MergeManager(store)
    for m in range(4):
        for r in (0, 1):
            assert merges.push(APP, 0, 1, m, r, block(m, r)) == PushCode.SUCCESS
    first, second = merged_files(APP, 0, 1, 0)[0], merged_files(APP, 0, 1, 1)[0]
    assert store.opened.count(first) == 1 and store.opened.count(second) == 4
    statuses = merges.finalize(APP, 0, 1)
    assert [s.bitmap for s in statuses] == [BitMap(range(4))] * 2
    for r, path in ((0, first), (1, second)):
        assert store.read_bytes(path) == b"".join(block(m, r) for m in range(4))
