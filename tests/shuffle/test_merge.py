"""The merge state machine, map-output files and block framing, without the network."""

from __future__ import annotations

import threading
import time

import pytest
from pyroaring import BitMap

from dataferry.errors import ConfigError, CorruptShuffleData
from dataferry.shuffle import MergeManager, PushCode, ShuffleServiceConfig, frame, unframe
from dataferry.shuffle.files import decode_offsets, merged_files
from dataferry.shuffle.mapoutput import read_offsets, write_map_output
from dataferry.store import LocalStore, Op, WrappingStore, open_store
from dataferry.store.faults import FaultRule, FaultStore

APP = "app-1"


def block(m: int, r: int, n: int = 100) -> bytes:
    return frame(m, r, bytes([m % 256]) * n)


def merged_layout(store, merge_id: int, reduce_id: int, shuffle: int = 0):
    data, index, meta = merged_files(APP, shuffle, merge_id, reduce_id)
    offsets = decode_offsets(store.read_bytes(index))
    raw, bitmaps, pos = store.read_bytes(meta), [], 0
    for _ in range(len(offsets) - 1):
        bm = BitMap.deserialize(raw[pos:])
        bitmaps.append(bm)
        pos += len(bm.serialize())
    assert pos == len(raw)
    return store.read_bytes(data), offsets, bitmaps


def test_blocks_are_framed_and_checked():
    data = block(3, 7) + block(4, 7, 10)
    got = list(unframe(data))
    assert [(b.map_index, b.reduce_id, len(b.payload)) for b in got] == [(3, 7, 100), (4, 7, 10)]
    assert frame(1, 1, b"") == b""  # empty blocks do not exist
    broken = bytearray(data)
    broken[30] ^= 0xFF
    with pytest.raises(CorruptShuffleData, match="checksum"):
        list(unframe(bytes(broken), "chunk 0"))
    with pytest.raises(CorruptShuffleData, match="truncated"):
        list(unframe(data[:-5]))


def test_map_output_index(tmp_path):
    store = LocalStore(str(tmp_path))
    offsets = write_map_output(store, APP, 2, 5, 0, [b"ab", b"", b"cde"])
    assert offsets == read_offsets(store, APP, 2, 5, 0)
    assert offsets[1] == offsets[2]  # the empty block takes no bytes
    with pytest.raises(CorruptShuffleData):
        decode_offsets(b"\0" * 7)


def test_merge_chunks_bitmaps_and_duplicates(tmp_path):
    store = LocalStore(str(tmp_path))
    mm = MergeManager(store, ShuffleServiceConfig(min_chunk_size=250))
    for m in range(7):
        assert mm.push(APP, 0, 0, m, 1, block(m, 1)) == PushCode.SUCCESS
    assert mm.push(APP, 0, 0, 3, 1, block(3, 1)) == PushCode.DUPLICATE  # retried map
    (status,) = mm.finalize(APP, 0, 0)
    data, offsets, bitmaps = merged_layout(store, 0, 1)
    assert status.bitmap == BitMap(range(7)) and status.size == len(data) == offsets[-1]
    # chunks close at the first block boundary past 250 bytes: 3 blocks of 120 bytes each
    assert offsets == [0, 360, 720, 840]
    assert bitmaps == [BitMap([0, 1, 2]), BitMap([3, 4, 5]), BitMap([6])]
    assert [b.map_index for b in unframe(data)] == list(range(7))
    assert mm.finalize(APP, 0, 0) == [status]  # a repeated finalize answers the same


def test_too_late_and_stale_and_newer_merge(tmp_path):
    store = LocalStore(str(tmp_path))
    mm = MergeManager(store)
    assert mm.push(APP, 0, 1, 0, 0, block(0, 0)) == PushCode.SUCCESS
    assert mm.push(APP, 0, 0, 1, 0, block(1, 0)) == PushCode.STALE  # older stage attempt
    old = merged_files(APP, 0, 1, 0)
    assert mm.push(APP, 0, 2, 0, 0, block(0, 0)) == PushCode.SUCCESS  # newer: old discarded
    assert not any(store.exists(p) for p in old)
    mm.finalize(APP, 0, 2)
    assert mm.push(APP, 0, 2, 5, 0, block(5, 0)) == PushCode.TOO_LATE
    with pytest.raises(ValueError, match="stale finalize"):
        mm.finalize(APP, 0, 1)
    assert mm.remove(APP, 0) and not store.exists("app-1/shuffle_0")


def test_a_store_without_positional_writes_is_refused_up_front():
    # merged files grow by writes at an offset: an object store could only rewrite them whole
    store = open_store("sim:s3", latency_scale=0)
    assert not store.capabilities.native_positional_write
    with pytest.raises(ConfigError, match="writes at an offset"):
        MergeManager(store)


def test_failed_write_is_overwritten_and_truncated(tmp_path):
    """A write that fails after putting bytes in the file leaves them past the committed end:
    the next block overwrites them and finalize truncates whatever is left."""
    rule = FaultRule("fail", "after", kinds=frozenset({Op.WRITE_AT}), path_glob="*.data")
    store = FaultStore(LocalStore(str(tmp_path)), [rule])
    mm = MergeManager(store, ShuffleServiceConfig(min_chunk_size=10**6))
    assert mm.push(APP, 0, 0, 0, 0, block(0, 0)) == PushCode.IO_ERROR
    assert mm.push(APP, 0, 0, 1, 0, block(1, 0, 50)) == PushCode.SUCCESS
    rule2 = FaultRule("fail", "after", kinds=frozenset({Op.WRITE_AT}), path_glob="*.data")
    store.add_rule(rule2)
    assert mm.push(APP, 0, 0, 2, 0, block(2, 0, 500)) == PushCode.IO_ERROR  # a long tail
    (status,) = mm.finalize(APP, 0, 0)
    data, offsets, bitmaps = merged_layout(store.inner, 0, 0)
    assert status.bitmap == BitMap([1]) and [b.map_index for b in unframe(data)] == [1]
    assert offsets == [0, len(data)] and bitmaps == [BitMap([1])]


def test_partition_stops_merging_after_too_many_io_errors(tmp_path):
    rule = FaultRule("fail", "before", kinds=frozenset({Op.WRITE_AT}), path_glob="*.data", times=-1)
    store = FaultStore(LocalStore(str(tmp_path)), [rule])
    mm = MergeManager(store, ShuffleServiceConfig(io_exceptions_threshold=2))
    codes = [mm.push(APP, 0, 0, m, 0, block(m, 0)) for m in range(5)]
    assert codes[:3] == [PushCode.IO_ERROR] * 3 and codes[3:] == [PushCode.MERGE_FAILED] * 2
    assert mm.finalize(APP, 0, 0) == []  # reported as not merged: reducers read originals


class SlowWrites(WrappingStore):
    """Data writes take a while, so concurrent pushes of one partition must wait."""

    def _write_at(self, path, offset, data):
        time.sleep(0.02)
        super()._write_at(path, offset, data)


def test_one_writer_and_bounded_deferred_memory(tmp_path):
    store = SlowWrites(LocalStore(str(tmp_path)))
    bound = 2000
    mm = MergeManager(store, ShuffleServiceConfig(max_deferred_bytes=bound, min_chunk_size=10**6))
    results: dict[int, object] = {}

    def pusher(m: int) -> None:
        r = mm.push(APP, 0, 0, m, 0, block(m, 0, 480))
        results[m] = r.result() if hasattr(r, "result") else r

    threads = [threading.Thread(target=pusher, args=(m,)) for m in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = list(results.values())
    assert PushCode.BUSY in codes  # past the bound: refused, not buffered
    assert mm.stats.maximums["deferred_bytes_peak"] <= bound
    assert mm.deferred_bytes == 0
    merged = {m for m, c in results.items() if c == PushCode.SUCCESS}
    (status,) = mm.finalize(APP, 0, 0)
    assert set(status.bitmap) == merged
    data, _, _ = merged_layout(store.inner, 0, 0)
    assert sorted(b.map_index for b in unframe(data)) == sorted(merged)  # never interleaved


def test_push_completions_belong_to_their_merge(tmp_path):
    """PUSH_DONE is recorded per merge id: an older stage attempt's is STALE, a newer merge
    starts with none, and after finalize a completion is TOO_LATE (and changes nothing)."""
    mm = MergeManager(LocalStore(str(tmp_path)))
    assert mm.push_done(APP, 0, 1, 4) == PushCode.SUCCESS  # before any block: a merge starts
    assert mm.push_done(APP, 0, 1, 4) == PushCode.SUCCESS  # repeated: idempotent
    assert mm.push(APP, 0, 1, 5, 0, block(5, 0)) == PushCode.SUCCESS
    assert mm.push_done(APP, 0, 1, 5) == PushCode.SUCCESS
    assert mm.pushed_maps(APP, 0, 1) == BitMap([4, 5])
    assert mm.pushed_maps(APP, 0, 2) == BitMap()  # another merge id: nothing
    assert mm.push_done(APP, 0, 0, 6) == PushCode.STALE
    assert mm.push_done(APP, 0, 3, 7) == PushCode.SUCCESS  # a newer merge replaces merge 1
    assert mm.pushed_maps(APP, 0, 3) == BitMap([7]) and mm.pushed_maps(APP, 0, 1) == BitMap()
    mm.finalize(APP, 0, 3)
    assert mm.push_done(APP, 0, 3, 8) == PushCode.TOO_LATE
    assert mm.pushed_maps(APP, 0, 3) == BitMap([7])
