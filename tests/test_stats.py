from __future__ import annotations

import json
import pickle
import threading

import pytest

from dataferry.stats import IOStatistics


def test_hadoop_shape():
    s = IOStatistics()
    s.incr("files")
    s.record_duration("op_rename", 0.002)
    s.record_duration("op_rename", 0.004, failed=True)
    snap = json.loads(json.dumps(s.snapshot()))
    assert set(snap) == {"counters", "gauges", "minimums", "maximums", "meanstatistics"}
    assert snap["counters"] == {"files": 1, "op_rename": 1, "op_rename.failures": 1}
    assert snap["minimums"]["op_rename.min"] == 2.0
    assert snap["maximums"]["op_rename.failures.max"] == 4.0
    assert snap["meanstatistics"]["op_rename.mean"] == {"samples": 1, "sum": 2.0}


def test_duration_context_counts_failures_including_crashes():
    s = IOStatistics()
    with s.duration("x"):
        pass
    with pytest.raises(KeyboardInterrupt), s.duration("x"):
        raise KeyboardInterrupt
    assert s.counter("x") == 1 and s.counter("x.failures") == 1
    (row,) = s.durations()
    assert (row.name, row.count, row.failures) == ("x", 2, 1)


def test_merge_snapshot_and_diff():
    a, b = IOStatistics(), IOStatistics()
    a.record_duration("op", 0.001)
    b.record_duration("op", 0.003)
    b.incr("n", 5)
    before = a.snapshot()
    a.merge(b.snapshot())
    assert a.counter("op") == 2 and a.counter("n") == 5
    assert a.minimums["op.min"] == 1.0 and a.maximums["op.max"] == 3.0
    d = a.diff(before)
    assert d["counters"] == {"op": 1, "n": 5}
    assert d["meanstatistics"]["op.mean"]["samples"] == 1


def test_thread_safe_and_picklable():
    s = IOStatistics()

    def hammer():
        for _ in range(1000):
            s.incr("c")

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.counter("c") == 8000
    assert pickle.loads(pickle.dumps(s)).counter("c") == 8000


def test_loads_hadoop_written_statistics():
    hadoop = {
        "counters": {"op_rename": 12, "op_rename.failures": 1},
        "gauges": {"stage.job_stage_rename_files.heap.memory": 1024},
        "minimums": {"op_rename.min": 3},
        "maximums": {"op_rename.max": 70},
        "meanstatistics": {"op_rename.mean": {"samples": 12, "sum": 240}},
    }
    s = IOStatistics(hadoop)
    (row,) = s.durations("op_")
    assert row.count == 12 and row.mean_s == pytest.approx(0.020)


def test_samples_keep_their_min_mean_and_max():
    s = IOStatistics()
    for seconds in (0.003, 0.001, 0.005):
        s.record_duration("op_write_at", seconds)
    snap = s.snapshot()
    assert snap["minimums"]["op_write_at.min"] == 1.0
    assert snap["maximums"]["op_write_at.max"] == 5.0
    assert snap["meanstatistics"]["op_write_at.mean"] == {"samples": 3, "sum": 9.0}


def test_a_store_times_every_operation_failures_apart(tmp_path):
    """Every store operation is timed and counted (a shuffle service makes one per merged
    block), a failed one under `.failures`, its statistic's names made once."""
    from dataferry.errors import NotFound
    from dataferry.stats import _sample_keys
    from dataferry.store import LocalStore

    store = LocalStore(str(tmp_path))
    store.write_bytes("a", b"xyz")
    assert store.read_range("a", 1, 5) == b"yz"
    with pytest.raises(NotFound):
        store.read_range("missing", 0, 1)
    assert store.stats.counter("op_read_range") == 1
    assert store.stats.counter("op_read_range.failures") == 1
    assert store.stats.snapshot()["meanstatistics"]["op_read_range.mean"]["samples"] == 1
    assert _sample_keys("op_read_range") is _sample_keys("op_read_range")


def test_a_duration_counts_a_failure_and_lets_it_through():
    s = IOStatistics()
    with s.duration("step"):
        pass
    with pytest.raises(KeyboardInterrupt), s.duration("step"):
        raise KeyboardInterrupt  # not an Exception: a crash counts as a failure too
    assert s.counter("step") == 1 and s.counter("step.failures") == 1
