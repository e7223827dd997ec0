"""The one bounded pool for parallel store I/O.

At most `threads` calls run at once and at most `2 * threads` are queued, so a stage over a
million entries never holds a million futures. With `threads <= 1` calls run inline, in input
order: the crash-point harness relies on that to give every store operation a stable index.

`adaptive=True` lets the evidence decide: the first calls (for SAMPLE_S, one at least) run
inline and are timed; if most of their wall time was this thread's own CPU time (user and system), the store answers faster than
Python can ask, so threads would only contend (for the GIL, and for the kernel's rename lock on
local disks) and the rest runs inline too. If it was mostly waiting, the rest goes to the pool.
Time the thread spent runnable but waiting for a CPU (other processes on a busy machine; Linux's
schedstat tells it) is not waiting for the store, and is left out of the wall time. A pool made
with `sample=False` (for a store whose every call waits on a server: `remote_calls`) knows the
answer already and sends everything to its threads from the first call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

CPU_BOUND_SHARE = 0.5  # adaptive: first calls busier than this run the rest inline
SAMPLE_S = 0.02  # adaptive: the first calls run inline (and are timed) for this long

T = TypeVar("T")
R = TypeVar("R")


class IOPool:
    """A reusable bounded thread pool (use as a context manager, or call `close`)."""

    def __init__(self, threads: int, name: str = "dataferry-io", sample: bool = True) -> None:
        self.threads = max(1, int(threads))
        self.sample = sample  # False: `adaptive` calls go to the threads at once
        self._executor = (
            ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=name)
            if self.threads > 1
            else None
        )
        self.last_mode = "inline"

    def __enter__(self) -> IOPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def map(self, fn: Callable[[T], R], items: Iterable[T], adaptive: bool = False) -> list[R]:
        """Apply fn to every item; results in input order. Stops submitting on the first
        failure, waits for calls in flight, then raises that failure (crashes included)."""
        return [r for _, r in sorted(self._run(fn, items, adaptive), key=lambda p: p[0])]

    def for_each(
        self, fn: Callable[[T], object], items: Iterable[T], adaptive: bool = False
    ) -> int:
        """Apply fn to every item for its effect; returns how many were processed."""
        return sum(1 for _ in self._run(fn, items, adaptive))

    def _run(
        self, fn: Callable[[T], R], items: Iterable[T], adaptive: bool = False
    ) -> Iterator[tuple[int, R]]:
        source = enumerate(items)
        if self._executor is not None and adaptive and self.sample:
            wall = cpu = 0.0
            while wall < SAMPLE_S:  # one call at least, more while they are quick
                item = next(source, None)
                if item is None:
                    return
                start, thread, queued = time.perf_counter(), time.thread_time(), run_queue_s()
                result = fn(item[1])
                cpu += time.thread_time() - thread
                wall += time.perf_counter() - start - (run_queue_s() - queued)
                yield item[0], result
            self.last_mode = "inline" if cpu >= CPU_BOUND_SHARE * wall else "pool"
        else:
            self.last_mode = "inline" if self._executor is None else "pool"
        if self.last_mode == "inline":
            for i, item in source:
                yield i, fn(item)
            return
        window = 2 * self.threads
        pending: dict[Future[R], int] = {}
        failure: BaseException | None = None
        exhausted = False
        while True:
            while not exhausted and failure is None and len(pending) < window:
                try:
                    i, item = next(source)
                except StopIteration:
                    exhausted = True
                    break
                pending[self._executor.submit(fn, item)] = i
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                exc = fut.exception()
                if exc is not None:
                    failure = failure or exc
                elif failure is None:
                    yield i, fut.result()
        if failure is not None:
            raise failure


def run_queue_s() -> float:
    """Seconds this thread has spent runnable, waiting for a CPU (Linux's
    /proc/thread-self/schedstat); 0.0 where that is not known."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def parallel_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """One-shot `IOPool(threads).map(fn, items)`."""
    with IOPool(threads) as pool:
        return pool.map(fn, items)
