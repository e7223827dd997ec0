from __future__ import annotations

import threading
import time

import pytest

from dataferry.store import IOPool, parallel_map


def test_results_in_input_order():
    assert parallel_map(lambda x: x * 2, range(100), threads=8) == [x * 2 for x in range(100)]


def test_inline_when_one_thread_runs_in_order():
    seen = []
    with IOPool(1) as pool:
        pool.for_each(seen.append, range(10))
    assert seen == list(range(10))


def test_concurrency_is_bounded():
    active = 0
    peak = 0
    lock = threading.Lock()

    def work(_):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.002)
        with lock:
            active -= 1

    with IOPool(4) as pool:
        assert pool.for_each(work, range(60)) == 60
    assert 1 < peak <= 4


def test_first_failure_stops_submission_and_is_raised():
    started = []

    def work(x):
        started.append(x)
        if x == 3:
            raise ValueError("boom at 3")
        time.sleep(0.001)

    with pytest.raises(ValueError, match="boom at 3"), IOPool(2) as pool:
        pool.for_each(work, range(1000))
    assert len(started) < 1000


def test_items_are_consumed_lazily():
    pulled = 0

    def items():
        nonlocal pulled
        for i in range(10_000):
            pulled += 1
            yield i

    with IOPool(2) as pool:
        it = pool._run(lambda x: x, items())
        next(it)
        assert pulled <= 2 * 2 + 2
        list(it)


def test_adaptive_runs_cpu_bound_work_inline_and_waiting_work_on_the_pool():
    threads_seen = set()

    def busy(_):
        threads_seen.add(threading.get_ident())
        sum(i * i for i in range(20_000))

    with IOPool(4) as pool:
        pool.for_each(busy, range(20), adaptive=True)
        assert pool.last_mode == "inline"
    assert threads_seen == {threading.get_ident()}

    def waits(_):
        time.sleep(0.005)

    with IOPool(4) as pool:
        pool.for_each(waits, range(20), adaptive=True)
        assert pool.last_mode == "pool"


def test_a_pool_that_does_not_sample_sends_adaptive_work_to_its_threads_at_once():
    """`sample=False` (a store whose every call waits on a server: HDFS's NameNode): even
    work that looks CPU-bound goes to the threads from the first call, none of it inline.
    Sampled, the first 20 ms run one call at a time: at 1,000 renames on HDFS, some twenty of
    them in series before the rest go in parallel."""
    me = threading.get_ident()
    seen = []

    def busy(_):
        seen.append(threading.get_ident())
        sum(i * i for i in range(20_000))

    with IOPool(4, sample=False) as pool:
        pool.for_each(busy, range(20), adaptive=True)
        assert pool.last_mode == "pool"
    assert len(seen) == 20 and me not in seen
