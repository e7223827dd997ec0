"""The one bounded pool for parallel store I/O.

At most `threads` calls run at once and at most `2 * threads` are queued, so a stage over a
million entries never holds a million futures. With `threads <= 1` calls run inline, in input
order: the crash-point harness relies on that to give every store operation a stable index.

`adaptive=True` lets the evidence decide: the first call runs inline and is timed; if most of
its wall time was this thread's own CPU time (user and system), the store answers faster than
Python can ask, so threads would only contend (for the GIL, and for the kernel's rename lock on
local disks) and the rest runs inline too. If it was mostly waiting, the rest goes to the pool.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

CPU_BOUND_SHARE = 0.5  # adaptive: a first call busier than this runs the rest inline

T = TypeVar("T")
R = TypeVar("R")


class IOPool:
    """A reusable bounded thread pool (use as a context manager, or call `close`)."""

    def __init__(self, threads: int, name: str = "dataferry-io") -> None:
        self.threads = max(1, int(threads))
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
        if self._executor is not None and adaptive:
            first = next(source, None)
            if first is None:
                return
            wall, cpu = time.perf_counter(), time.thread_time()
            result = fn(first[1])
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            self.last_mode = "inline" if cpu >= CPU_BOUND_SHARE * wall else "pool"
            yield first[0], result
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


def parallel_map(fn: Callable[[T], R], items: Iterable[T], threads: int) -> list[R]:
    """One-shot `IOPool(threads).map(fn, items)`."""
    with IOPool(threads) as pool:
        return pool.map(fn, items)
