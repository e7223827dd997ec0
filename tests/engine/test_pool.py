"""The one attempt loop of the embedded engine's runners (`engine/pool.py`)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from dataferry.engine.pool import AttemptPool, run_with_retries
from dataferry.errors import EngineError


class Flaky:
    """Fails the first `failures[i]` calls for item i, then returns i * 10."""

    def __init__(self, failures: dict[int, int]) -> None:
        self.failures = dict(failures)
        self.calls: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def __call__(self, i: int, attempt: int) -> int:
        with self.lock:
            self.calls.append((i, attempt))
            left = self.failures.get(i, 0)
            self.failures[i] = left - 1
        if left > 0:
            raise OSError(f"item {i} attempt {attempt} failed")
        return i * 10


def test_results_in_call_order_after_retries_with_new_arguments():
    flaky = Flaky({1: 2, 3: 1})
    seen = []
    with ThreadPoolExecutor(3) as ex:
        results = run_with_retries(
            ex,
            [(flaky, (i, 0)) for i in range(5)],
            max_attempts=3,
            kind="map",
            retry_args=lambda args, tries: (args[0], tries),
            on_result=seen.append,
        )
    assert results == [0, 10, 20, 30, 40]
    assert sorted(seen) == results
    # the retries got the arguments retry_args made from the call's own and the tries so far
    assert sorted(a for i, a in flaky.calls if i == 1) == [0, 1, 2]
    assert sorted(a for i, a in flaky.calls if i == 3) == [0, 1]


def test_a_call_failing_max_attempts_times_raises_naming_it():
    flaky = Flaky({2: 5})
    with ThreadPoolExecutor(2) as ex, pytest.raises(EngineError, match="reduce task 2 failed 3"):
        run_with_retries(ex, [(flaky, (i, 0)) for i in range(3)], max_attempts=3, kind="reduce")
    assert [c for c in flaky.calls if c[0] == 2] == [(2, 0)] * 3  # same arguments by default


def test_max_attempts_one_never_retries():
    flaky = Flaky({0: 1})
    with ThreadPoolExecutor(1) as ex, pytest.raises(EngineError):
        run_with_retries(ex, [(flaky, (0, 0))], max_attempts=1, kind="map")
    assert flaky.calls == [(0, 0)]


def test_finished_hands_back_attempts_in_submission_order():
    gate = threading.Event()
    started = threading.Semaphore(0)

    def slow(x: int) -> int:
        started.release()
        gate.wait(5)
        return x

    with ThreadPoolExecutor(4) as ex:
        pool: AttemptPool[str] = AttemptPool(ex, max_attempts=2)
        for tag, x in (("c", 3), ("a", 1), ("b", 2)):
            pool.submit(tag, slow, x)
        for _ in range(3):
            assert started.acquire(timeout=5)
        assert pool.finished(timeout=0.01) == []  # nothing ended yet
        gate.set()
        ex.shutdown(wait=True)  # all three have ended: they come back in the order submitted
        done = [(tag, f.result()) for tag, f in pool.finished(timeout=5)]
    assert done == [("c", 3), ("a", 1), ("b", 2)]
    assert not pool
    assert pool.may_retry(1) and not pool.may_retry(2)


def test_drain_waits_for_attempts_in_flight_and_forgets_them():
    ended = []

    def work(x: int) -> None:
        ended.append(x)
        raise OSError("ignored by drain")

    with ThreadPoolExecutor(2) as ex:
        pool: AttemptPool[int] = AttemptPool(ex, max_attempts=1)
        for x in range(4):
            pool.submit(x, work, x)
        pool.drain()
        assert sorted(ended) == [0, 1, 2, 3]
        assert not pool
