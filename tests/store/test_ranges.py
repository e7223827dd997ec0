"""`Store.range_reader`: many ranges of one file, as `read_range` reads them; a local store's file
opened once (no link followed) and read by offset, any other store read range by range."""

from __future__ import annotations

import os
import random

import pytest

from dataferry.errors import LinkRefused, NotFound
from dataferry.store import FaultRule, FaultStore, LocalStore, Op, open_store

DATA = random.Random(3).randbytes(30_000)
RANGES = [(0, 100), (5000, 3000), (29_000, 5000), (30_000, 10), (12_345, 1)]


def store_with_data(kind: str, tmp_path, bucket: str):
    """A fresh store of `kind` holding DATA at m/out.data."""
    url = f"memory://{bucket}/{tmp_path.name}" if kind == "memory" else str(tmp_path / "s")
    store = open_store(url)
    if kind == "faulty local":
        store = FaultStore(store, [])
    store.write_bytes("m/out.data", DATA)
    return store


@pytest.mark.parametrize("kind", ["local", "memory", "faulty local"])
def test_ranges_read_as_read_range_reads_them(tmp_path, kind):
    store = store_with_data(kind, tmp_path, "ranges")
    reader = store.range_reader("m/out.data")
    try:
        for start, length in RANGES:
            assert reader.read(start, length) == store.read_range("m/out.data", start, length)
    finally:
        reader.close()


def test_a_local_file_is_opened_once_and_closed_by_close(tmp_path):
    store = LocalStore(str(tmp_path / "s"))
    store.write_bytes("m/out.data", DATA)
    opens = store.stats.counter(f"op_{Op.READ.value}")
    reader = store.range_reader("m/out.data")
    for start, length in RANGES:
        reader.read(start, length)
    assert store.stats.counter(f"op_{Op.READ.value}") == opens + 1
    assert reader.read(1, 2) == DATA[1:3]
    os.unlink(tmp_path / "s" / "m" / "out.data")  # the open file reads on, as a view does
    assert reader.read(100, 5) == DATA[100:105]
    reader.close()
    reader.close()  # twice is harmless
    with pytest.raises(ValueError, match="read after close"):
        reader.read(0, 1)


def test_a_missing_file_or_a_link_is_refused_at_the_open(tmp_path):
    store = LocalStore(str(tmp_path / "s"))
    store.write_bytes("real.data", DATA)
    os.symlink(tmp_path / "s" / "real.data", tmp_path / "s" / "link.data")
    with pytest.raises(NotFound):
        store.range_reader("missing.data")
    with pytest.raises(LinkRefused):
        store.range_reader("link.data")


def test_a_wrapping_store_sees_every_read(tmp_path):
    rule = FaultRule(action="error", when="before", kinds=frozenset({Op.READ_RANGE}), times=1)
    store = FaultStore(LocalStore(str(tmp_path / "s")), [rule])
    store.write_bytes("m/out.data", DATA)
    reader = store.range_reader("m/out.data")
    with pytest.raises(Exception, match="injected"):
        reader.read(0, 10)  # the fault fires on the read itself
    assert reader.read(0, 10) == DATA[:10]


@pytest.mark.parametrize("kind", ["local", "memory", "faulty local"])
def test_ranges_read_into_a_buffer_as_read_reads_them(tmp_path, kind):
    """`read_into` fills the caller's buffer (a local file by preadv, others by a copy of
    `read`) and says how many bytes it holds: fewer at the end of the file."""
    store = store_with_data(kind, tmp_path, "into")
    reader = store.range_reader("m/out.data")
    try:
        for start, length in RANGES:
            buf = bytearray(b"\xff" * (length + 3))
            view = memoryview(buf)[:length]
            n = reader.read_into(start, view)
            assert n == len(DATA[start : start + length])
            assert bytes(view[:n]) == DATA[start : start + length]
            assert buf[length:] == b"\xff" * 3  # nothing past the view
    finally:
        reader.close()


def test_a_local_read_into_after_close_is_refused(tmp_path):
    store = LocalStore(str(tmp_path / "s"))
    store.write_bytes("m/out.data", DATA)
    reader = store.range_reader("m/out.data")
    opens = store.stats.counter(f"op_{Op.READ_RANGE.value}")
    reader.read_into(10, memoryview(bytearray(10)))
    assert store.stats.counter(f"op_{Op.READ_RANGE.value}") == opens + 1  # counted as a read
    reader.close()
    with pytest.raises(ValueError, match="read after close"):
        reader.read_into(0, memoryview(bytearray(1)))


@pytest.mark.parametrize("kind", ["local", "memory", "faulty local"])
def test_many_ranges_read_into_buffers_as_read_into_reads_them(tmp_path, kind):
    """`Store.read_ranges_into`: each (reader, start, view) as its `read_into`, fewer bytes at
    the end of the file."""
    store = store_with_data(kind, tmp_path, "many")
    readers = [store.range_reader("m/out.data") for _ in RANGES]
    try:
        views = [memoryview(bytearray(length)) for _, length in RANGES]
        reads = [(r, start, v) for r, (start, _), v in zip(readers, RANGES, views, strict=True)]
        got = store.read_ranges_into(reads)
        assert got == [len(DATA[s : s + n]) for s, n in RANGES]
        assert [bytes(v[:n]) for v, n in zip(views, got, strict=True)] == [
            DATA[s : s + n] for s, n in RANGES
        ]
    finally:
        for r in readers:
            r.close()


def test_a_local_stores_kept_open_ranges_are_one_read_operation(tmp_path):
    """A reducer's blocks of a hundred map outputs: one store operation (its timing and
    statistics) for them all, not one apiece; a closed reader is still refused."""
    store = LocalStore(str(tmp_path / "s"))
    store.write_bytes("m/out.data", DATA)
    readers = [store.range_reader("m/out.data") for _ in RANGES]
    before = store.stats.counter(f"op_{Op.READ_RANGE.value}")
    pairs = zip(readers, RANGES, strict=True)
    reads = [(r, start, memoryview(bytearray(n))) for r, (start, n) in pairs]
    store.read_ranges_into(reads)
    assert store.stats.counter(f"op_{Op.READ_RANGE.value}") == before + 1
    readers[2].close()
    with pytest.raises(ValueError, match="read after close"):
        store.read_ranges_into(reads)
    for r in readers:
        r.close()


def test_a_wrapping_store_sees_every_one_of_many_reads(tmp_path):
    rule = FaultRule(action="error", when="before", kinds=frozenset({Op.READ_RANGE}), times=2)
    store = FaultStore(LocalStore(str(tmp_path / "s")), [rule])
    store.write_bytes("m/out.data", DATA)
    reader = store.range_reader("m/out.data")
    for _ in range(2):
        with pytest.raises(Exception, match="injected"):
            store.read_ranges_into([(reader, 0, memoryview(bytearray(10)))] * 3)
    buf = memoryview(bytearray(10))
    assert store.read_ranges_into([(reader, 5, buf)] * 3) == [10, 10, 10]
    assert bytes(buf) == DATA[5:15]
