"""Map outputs kept open across the reduces of one merge: opened once, closed when another
merge begins, past the bound or on release, and never under a reader still reading."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from dataferry.shuffle import open_outputs, per_process
from dataferry.shuffle.background import process_pusher
from dataferry.shuffle.open_outputs import OpenMapOutputs
from dataferry.store import LocalStore, Op

DATA = bytes(range(256)) * 40


@pytest.fixture
def store(tmp_path):
    store = LocalStore(str(tmp_path / "node"))
    for i in range(4):
        store.write_bytes(f"app/m{i}.data", DATA)
    return store


def opens(store) -> int:
    return store.stats.counter(f"op_{Op.READ.value}")


def test_a_merges_reduces_open_each_map_output_once(store):
    outputs = OpenMapOutputs()
    for reduce_id in range(5):  # five reduces, a block of each of four map outputs
        for i in range(4):
            got = outputs.read("merge-1", store, "node", f"app/m{i}.data", reduce_id * 10, 10)
            assert got == DATA[reduce_id * 10 : reduce_id * 10 + 10]
    assert opens(store) == 4 and outputs.open_count == 4


def test_another_merge_closes_the_last_ones_files(store):
    outputs = OpenMapOutputs()
    outputs.read("merge-1", store, "node", "app/m0.data", 0, 4)
    (first,) = outputs._open.values()
    outputs.read("merge-2", store, "node", "app/m1.data", 0, 4)
    assert first.reader.fd == -1 and outputs.open_count == 1
    assert outputs.release() == 1 and outputs.open_count == 0


def test_the_least_recently_read_close_past_the_bound(store):
    outputs = OpenMapOutputs(limit=2)
    for i in (0, 1, 0, 2):  # m1 is the least recently read when m2 opens
        outputs.read("m", store, "node", f"app/m{i}.data", 0, 1)
    assert sorted(path for _, path in outputs._open) == ["app/m0.data", "app/m2.data"]
    assert opens(store) == 3


class _Slow:
    """A reader whose read waits until let go."""

    def __init__(self) -> None:
        self.go, self.reading, self.closed = threading.Event(), threading.Event(), False

    def read_into(self, start: int, view: memoryview) -> int:
        self.reading.set()
        assert self.go.wait(5)
        assert not self.closed, "closed under its reader"
        view[:] = b"x" * len(view)
        return len(view)

    def close(self) -> None:
        self.closed = True


def test_a_file_being_read_is_closed_by_its_last_reader(monkeypatch, store):
    slow = _Slow()
    monkeypatch.setattr(store, "range_reader", lambda _path: slow)
    outputs = OpenMapOutputs()
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(outputs.read, "m", store, "node", "app/m0.data", 0, 3)
        assert slow.reading.wait(5)
        assert outputs.release() == 1  # and another merge would do the same
        assert not slow.closed
        slow.go.set()
        assert bytes(reading.result()) == b"xxx"
    assert slow.closed


def test_two_readers_opening_one_file_keep_one_descriptor(monkeypatch, store):
    made: list[object] = []
    real = store.range_reader

    def slow_open(path):
        time.sleep(0.05)  # both threads get here before either has added its reader
        reader = real(path)
        made.append(reader)
        return reader

    monkeypatch.setattr(store, "range_reader", slow_open)
    outputs = OpenMapOutputs()
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda _: outputs.read("m", store, "n", "app/m0.data", 5, 5), (1, 2)))
    assert got == [DATA[5:10]] * 2 and len(made) == 2
    assert outputs.open_count == 1 and sorted(r.fd == -1 for r in made) == [False, True]


def test_each_process_has_its_own(monkeypatch):
    mine, pusher = open_outputs.open_map_outputs(), process_pusher()
    assert open_outputs.open_map_outputs() is mine and process_pusher() is pusher
    monkeypatch.setattr(per_process.os, "getpid", lambda: -1)  # as a forked child sees it
    assert open_outputs.open_map_outputs() is not mine and process_pusher() is not pusher


def test_blocks_are_read_into_buffers_of_arrows_pool(store):
    """A block comes in a buffer of Arrow's memory pool (which keeps freed pages for the
    next reduce), not a bytes object of the C heap."""
    import pyarrow as pa

    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    got = OpenMapOutputs().read("m", store, "node", "app/m0.data", 100, 5000)
    assert got == DATA[100:5100] and pool.bytes_allocated() - before >= 5000
    assert OpenMapOutputs().read("m", store, "node", "app/m0.data", len(DATA) - 3, 10) == DATA[-3:]


def test_a_reduces_blocks_of_many_map_outputs_are_one_lookup_and_one_read(store, monkeypatch):
    """`read_many`: the files are found under one lock and read by one store operation (a
    block per map output, as a reducer reads them), the same bytes as `read` one by one."""
    outputs = OpenMapOutputs()
    ranges = [(f"app/m{i}.data", 7 * i, 100) for i in range(4)] + [("app/m1.data", 10_230, 50)]
    got = outputs.read_many("merge-1", store, "node", ranges)
    assert [bytes(v) for v in got] == [DATA[s : s + n] for _, s, n in ranges]  # the last short
    assert opens(store) == 4 and outputs.open_count == 4
    locks = []
    real = outputs._lock

    class Counting:
        def __enter__(self):
            locks.append(1)
            return real.__enter__()

        def __exit__(self, *exc):
            return real.__exit__(*exc)

    monkeypatch.setattr(outputs, "_lock", Counting())
    reads = store.stats.counter(f"op_{Op.READ_RANGE.value}")
    again = outputs.read_many("merge-1", store, "node", ranges)
    assert [bytes(v) for v in again] == [bytes(v) for v in got] and opens(store) == 4
    assert store.stats.counter(f"op_{Op.READ_RANGE.value}") == reads + 1
    assert len(locks) == 2  # the files found, then let go
    assert all(e.users == 0 for e in outputs._open.values())
