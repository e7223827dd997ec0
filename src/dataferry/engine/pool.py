"""Worker processes and the one attempt loop of the embedded engine's runners.

Both the write-job driver (`local.py`) and the local shuffle (`shuffle/local.py`) submit
attempts to an executor, handle each finished one in launch order, and start another attempt
of a failed task until it has had `max_attempts` (Spark's spark.task.maxFailures).
`AttemptPool` is that loop; `run_with_retries` is the simple case of it, a list of calls whose
results are collected.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any, Generic, TypeVar

from ..errors import ConfigError, EngineError

Tag = TypeVar("Tag")
Call = tuple[Callable[..., Any], tuple[Any, ...]]


def worker_context() -> multiprocessing.context.BaseContext:
    """forkserver: workers fork from a clean server that has dataferry and pyarrow imported
    (fast start, no inherited threads); `__main__` is loaded only when it is a real file."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", "dataferry.engine.attempt", "dataferry.dataset.write"])
    return ctx


def deterministic(error: BaseException) -> bool:
    """Whether an attempt's error would be the same in every attempt, so retrying it only
    delays the job's failure: a ConfigError (bad input or options), whether raised here or
    in a worker (it arrives as itself: pickled, or wrapped by Ray in a subclass of it)."""
    return isinstance(error, ConfigError)


class AttemptPool(Generic[Tag]):
    """Attempts in flight on an executor, each with a tag saying what it was.

    `finished` waits for some to end and returns them in the order they were submitted, so
    the handling does not depend on which worker happened to be first; `may_retry` is the one
    rule for starting another attempt of a failed task.
    """

    def __init__(self, executor: Executor, max_attempts: int) -> None:
        self.executor = executor
        self.max_attempts = max_attempts
        self._futures: dict[Future, tuple[int, Tag]] = {}
        self._seq = itertools.count()

    def submit(self, tag: Tag, fn: Callable[..., Any], *args: Any) -> None:
        self._futures[self.executor.submit(fn, *args)] = (next(self._seq), tag)

    def __bool__(self) -> bool:
        return bool(self._futures)

    def finished(self, timeout: float | None = None) -> list[tuple[Tag, Future]]:
        """Attempts that ended within `timeout` seconds (None: wait for one), oldest first."""
        if not self._futures:
            return []
        done, _ = wait(list(self._futures), timeout=timeout, return_when=FIRST_COMPLETED)
        ordered = sorted(done, key=lambda f: self._futures[f][0])
        return [(self._futures.pop(f)[1], f) for f in ordered]

    def may_retry(self, attempts_made: int) -> bool:
        """Whether a task whose `attempts_made` attempts all failed gets another one."""
        return attempts_made < self.max_attempts

    def drain(self) -> None:
        """Let attempts in flight finish, ignoring their outcome (the caller gives up)."""
        for fut in list(self._futures):
            try:
                fut.result()
            except Exception:
                pass
        self._futures.clear()


def run_with_retries(
    executor: Executor,
    calls: Sequence[Call],
    *,
    max_attempts: int,
    kind: str,
    retry_args: Callable[[tuple[Any, ...], int], tuple[Any, ...]] | None = None,
    on_result: Callable[[Any], None] | None = None,
) -> list[Any]:
    """Run every call on the executor, retrying a failed one; their results in call order.

    `retry_args(args, attempts_made)` gives the arguments of the next attempt from the call's
    own (default: the same). A call that fails `max_attempts` times raises EngineError after the attempts
    still in flight have ended; one that fails with a ConfigError raises it at once (the
    same input fails the same way again).
    """
    pool: AttemptPool[tuple[int, int]] = AttemptPool(executor, max_attempts)
    results: list[Any] = [None] * len(calls)
    for i, (fn, args) in enumerate(calls):
        pool.submit((i, 1), fn, *args)
    while pool:
        for (i, tries), fut in pool.finished():
            error = fut.exception()
            if error is None:
                results[i] = fut.result()
                if on_result is not None:
                    on_result(results[i])
                continue
            if deterministic(error):
                pool.drain()
                raise error
            if not pool.may_retry(tries):
                pool.drain()
                raise EngineError(f"{kind} task {i} failed {tries} times: {error}") from error
            fn, args = calls[i]
            if retry_args is not None:
                args = retry_args(args, tries)
            pool.submit((i, tries + 1), fn, *args)
    return results
