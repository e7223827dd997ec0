"""`Store.read_view`: `read_range`'s bytes as a read-only view; a local store maps the file
(no copy), and the view stays whole when the file is deleted or replaced by a rename."""

from __future__ import annotations

import mmap
import random

import pytest

from dataferry.errors import NotFound
from dataferry.store import LocalStore, WrappingStore

from ..conftest import make_store

SIZE = 20_000  # several pages
DATA = random.Random(7).randbytes(SIZE)  # every offset's bytes differ from its neighbours'

RANGES = {
    "start": (0, 100, 100),
    "whole": (0, SIZE, SIZE),
    "unaligned-past-a-page": (5000, 3000, 3000),
    "third-page-plus-one": (2 * mmap.PAGESIZE + 1, 7000, 7000),
    "runs-past-the-end": (19_000, 5000, SIZE - 19_000),
    "at-the-end": (SIZE, 10, 0),
    "beyond-the-end": (SIZE + 5000, 10, 0),
}


@pytest.mark.parametrize(("start", "length", "expected"), RANGES.values(), ids=RANGES.keys())
def test_local_view_maps_the_range_of_read_range(local_store, start, length, expected):
    assert isinstance(local_store, LocalStore)
    local_store.write_bytes("d/f.bin", DATA)
    view = local_store.read_view("d/f.bin", start, length)
    assert isinstance(view, memoryview) and view.readonly
    assert len(view) == expected
    assert bytes(view) == local_store.read_range("d/f.bin", start, length)
    assert bytes(view) == DATA[start : start + length]
    if expected:
        # the file's pages, mapped: not a copy into fresh memory
        assert isinstance(view.obj, mmap.mmap)
        with pytest.raises(TypeError):
            view[0] = 0  # read-only


def test_local_view_survives_delete_and_replace(local_store):
    local_store.write_bytes("f", DATA)
    kept = local_store.read_view("f", 5000, 4000)
    local_store.delete("f")
    assert not local_store.exists("f")
    assert bytes(kept) == DATA[5000:9000]
    local_store.write_bytes("g", DATA)
    old = local_store.read_view("g", 0, SIZE)
    local_store.write_bytes("g", b"\0" * SIZE)  # a whole-file write replaces it by a rename
    assert local_store.read_range("g", 0, 10) == b"\0" * 10
    assert bytes(old) == DATA
    assert bytes(local_store.read_view("g", 0, SIZE)) == b"\0" * SIZE


WITHOUT_OWN_VIEW = ["memory", "sim-hdfs", "faulty-local", "sub-local"]


@pytest.mark.parametrize("kind", ["local", *WITHOUT_OWN_VIEW])
def test_missing_file_raises_not_found(kind, tmp_path):
    store = make_store(kind, tmp_path)
    store.write_bytes("d/there", b"x")
    with pytest.raises(NotFound):
        store.read_view("d/missing", 0, 10)


@pytest.mark.parametrize("kind", WITHOUT_OWN_VIEW)
def test_a_store_without_its_own_view_gives_read_range_bytes(kind, tmp_path):
    store = make_store(kind, tmp_path)
    assert type(store)._read_view is not LocalStore._read_view
    if kind != "memory":
        assert isinstance(store, WrappingStore)
    store.write_bytes("d/f.bin", DATA)
    for start, length, expected in RANGES.values():
        view = store.read_view("d/f.bin", start, length)
        assert isinstance(view, memoryview) and view.readonly
        assert len(view) == expected
        assert bytes(view) == store.read_range("d/f.bin", start, length)
        assert bytes(view) == DATA[start : start + length]
