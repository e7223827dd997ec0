"""The asynchronous pusher: a map task returns before its pushes are done, held buffers stay
within their bound, and every map's completion reaches the mergers for the driver to collect.

The mergers are real service processes; a merger is frozen with SIGSTOP to hold pushes in
flight (its socket accepts, nothing is answered) and thawed with SIGCONT.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

import pyarrow as pa
import pytest
from pyroaring import BitMap

from dataferry.engine.shuffle import MapTask, run_map_task
from dataferry.shuffle import (
    BackgroundPusher,
    MapStatus,
    MergedPartition,
    PushConfig,
    PushTarget,
    ReduceInput,
    ShuffleClient,
    ShuffleServiceProcess,
    process_pusher,
    read_reduce,
    register_app,
    write_map_output,
)
from dataferry.shuffle.blocks import frame_pieces
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.store import LocalStore

TOKEN = "background-token"
APP = "app-bg"


@pytest.fixture
def merger(tmp_path):
    with ShuffleServiceProcess(str(tmp_path / "merger"), TOKEN) as svc:
        svc.creds = register_app(APP, [svc.address], TOKEN)
        yield svc


@contextmanager
def frozen(svc: ShuffleServiceProcess):
    """The service stops answering (pushes to it stay in flight) until the block ends."""
    os.kill(svc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(svc.pid, signal.SIGCONT)


def table(m: int, rows: int = 2000) -> pa.Table:
    return pa.table({"key": [(m * 7 + i) % 50 for i in range(rows)], "m": [m] * rows})


def test_a_map_returns_before_its_pushes_finish(merger, tmp_path):
    target = PushTarget(APP, 1, 0, 4, (merger.address,), merger.creds)
    node = str(tmp_path / "node")
    task = MapTask(APP, 1, 0, 0, node, "127.0.0.1:1", 4, ("key",), None, target)
    pusher = process_pusher()
    returned = threading.Event()
    results = []
    with frozen(merger):
        worker = threading.Thread(
            target=lambda: (results.append(run_map_task(task, table(0))), returned.set())
        )
        worker.start()
        # a map that pushed before returning would wait for the frozen merger
        assert returned.wait(20), "the map task waited for its pushes"
        assert results[0].push == {"background": True}
        assert pusher.pending >= 1  # its pushes are still to be done
    assert pusher.wait_idle(30)
    client = ShuffleClient(merger.address, credentials=merger.creds)
    assert client.pushed_maps(APP, 1, 0) == BitMap([0])  # the completion reached the merger
    statuses = client.finalize(APP, 1, 0)
    assert {s.reduce_id for s in statuses} == {r for r in range(4) if results[0].status.sizes[r]}
    assert all(s.bitmap == BitMap([0]) for s in statuses)


def test_held_buffers_stay_within_their_bound_and_the_rest_is_read_back(merger, tmp_path):
    """While the merger is frozen, map outputs pile up in the pusher: the first fits in
    `max_held_bytes` and is held, the others are pushed from their files; every block
    arrives, once."""
    store = LocalStore(str(tmp_path / "node"))
    maps = 5
    payloads = {m: [bytes([m]) * 4000, bytes([m + 100]) * 3000] for m in range(maps)}
    offsets, pieces = {}, {}
    for m in range(maps):
        pieces[m] = []
        offsets[m] = write_map_output(store, APP, 2, m, 0, payloads[m], pieces[m])
    size = offsets[0][-1]
    cfg = PushConfig(max_held_bytes=size + size // 2)  # room for one map output only
    target = PushTarget(APP, 2, 0, 2, (merger.address,), merger.creds, cfg)
    pusher = BackgroundPusher()
    with frozen(merger):
        done = [pusher.submit(store, target, m, 0, offsets[m], pieces[m]) for m in range(maps)]
        assert pusher.held_bytes <= cfg.max_held_bytes
        time.sleep(0.2)
        assert not any(f.done() for f in done)  # all in flight or queued behind the first
    reports = [f.result(30) for f in done]
    assert all(r.blocks == 2 and r.announced == 1 for r in reports)
    stats = pusher.stats.snapshot()
    assert stats["counters"]["push_maps_from_memory"] == 1
    assert stats["counters"]["push_maps_from_file"] == maps - 1
    assert stats["maximums"]["push_held_bytes_peak"] <= cfg.max_held_bytes
    assert pusher.held_bytes == 0 and pusher.pending == 0
    client = ShuffleClient(merger.address, credentials=merger.creds)
    assert client.pushed_maps(APP, 2, 0) == BitMap(range(maps))
    merged = {s.reduce_id: s for s in client.finalize(APP, 2, 0)}
    for r in range(2):
        statuses = tuple(
            MapStatus(m, 0, merger.address, block_sizes(offsets[m])) for m in range(maps)
        )
        part = MergedPartition(r, merger.address, merged[r].bitmap, merged[r].size)
        blocks, report = read_reduce(ReduceInput(APP, 2, 0, r, statuses, part, merger.creds))
        assert [bytes(b.payload) for b in blocks] == [payloads[m][r] for m in range(maps)]
        assert report.merged_blocks == maps and report.original_blocks == 0


def test_a_merger_that_cannot_be_reached_is_not_announced_to(tmp_path):
    store = LocalStore(str(tmp_path / "node"))
    pieces: list = []
    offsets = write_map_output(store, APP, 3, 0, 0, [b"x" * 100], pieces)
    target = PushTarget(APP, 3, 0, 1, ("127.0.0.1:9",))
    report = BackgroundPusher().submit(store, target, 0, 0, offsets, pieces).result(30)
    assert report.unreachable == ["127.0.0.1:9"] and report.announced == 0


def test_blocks_are_framed_around_the_encoders_buffer():
    """Pieces keep the payload's own buffer: nothing is copied next to the header."""
    payload = memoryview(pa.py_buffer(b"z" * 1000))
    header, body = frame_pieces(4, 2, payload)
    assert body.obj is payload.obj and len(header) == 20


@pytest.mark.parametrize(
    "location, by_reference, held",
    [
        ("merger", True, False),  # the merger reads the blocks from the map output itself
        ("merger", False, True),
        ("203.0.113.5:7337", True, True),  # a merger on another host needs the bytes
    ],
)
def test_a_map_holds_its_blocks_only_for_mergers_that_need_their_bytes(
    merger, tmp_path, location, by_reference, held
):
    pusher = process_pusher()
    config = PushConfig(by_reference=by_reference)
    target = PushTarget(APP, 3, 0, 4, (merger.address,), merger.creds, config)
    where = merger.address if location == "merger" else location
    task = MapTask(APP, 3, 0, 0, str(tmp_path / "node"), where, 4, ("key",), None, target)
    counters = ("push_maps_from_memory", "push_maps_from_file")
    before = [pusher.stats.counter(c) for c in counters]
    run_map_task(task, table(0))
    after = [pusher.stats.counter(c) for c in counters]
    assert [a - b for a, b in zip(after, before, strict=True)] == ([1, 0] if held else [0, 1])
    assert pusher.wait_idle(30)
