"""The embedded engine: runs a write job's task attempts on a local process pool.

The driver side (this module) holds the commit coordinator and runs job setup and job commit;
attempts run in worker processes (`attempt.py`). It retries failed attempts up to
`max_attempts` (Spark's spark.task.maxFailures), launches speculative duplicates
(spark.speculation), and can inject deaths into chosen attempts.

With `workers=0` every attempt runs inline in the driver's process in a fixed order, so each
store operation of a job has a stable index: the crash-point harness runs jobs that way.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..commit.base import Committer
from ..commit.job.session import Job, new_session
from ..commit.protocol import JobCommitResult, JobContext, TaskAttemptContext, TaskCommitMessage
from ..errors import ConfigError, EngineError, TaskFailed
from ..ids import JobId
from ..stats import IOStatistics
from .attempt import (
    AttemptFailure,
    TaskWork,
    abort_attempt,
    commit_attempt,
    run_attempt,
)
from .feed import FeedFailed, TaskFeed
from .pool import AttemptPool, deterministic, worker_context

EventHook = Callable[[str, int, int], None]


@dataclass(frozen=True)
class LocalEngineConfig:
    """Options of the embedded engine.

    workers: worker processes or threads (None: one per core; 0: inline and deterministic).
    executor: `processes` (isolation: a task that crashes its interpreter takes only its
        worker) or `threads` (for data already in this process's memory, such as an Arrow
        table: nothing is copied, and pyarrow releases the GIL while it encodes and writes).
    max_attempts: attempts per task before the job fails (spark.task.maxFailures, 4).
    speculation: launch duplicates of slow tasks (spark.speculation).
    speculation_quantile: fraction of tasks done before speculating (spark.speculation.quantile).
    speculation_multiplier: how much slower than the median a task must be
        (spark.speculation.multiplier).
    speculate_tasks: tasks that always get one duplicate attempt (for demos and tests).
    failures: deaths to inject into chosen attempts.
    """

    workers: int | None = None
    executor: str = "processes"
    max_attempts: int = 4
    speculation: bool = False
    speculation_quantile: float = 0.75
    speculation_multiplier: float = 1.5
    speculate_tasks: tuple[int, ...] = ()
    failures: tuple[AttemptFailure, ...] = ()

    def __post_init__(self) -> None:
        if self.executor not in ("processes", "threads"):
            raise ConfigError(f"executor must be 'processes' or 'threads', got {self.executor!r}")
        if self.workers is not None and self.workers < 0:
            raise ConfigError(f"workers must be >= 0, got {self.workers}")
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {self.max_attempts}")


@dataclass
class JobRun:
    """What running a job did."""

    job: JobContext
    commit: JobCommitResult
    messages: list[TaskCommitMessage]
    results: dict[int, Any]
    attempts: int
    failed_attempts: int
    speculative_attempts: int
    denied_commits: int
    write_s: float
    job_commit_s: float
    wall_s: float
    task_commit_s: float
    store_stats: IOStatistics
    committer_stats: IOStatistics
    errors: dict[int, list[str]] = field(default_factory=dict)
    setup_s: float = 0.0  # the job's setup on the driver (part of write_s, before any task)


class _InlineExecutor(Executor):
    """Runs each call at submit time, in the caller's thread."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        fut: Future = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except Exception as e:
            fut.set_exception(e)
        return fut


class LocalEngine:
    """Runs jobs on a process pool (or inline with workers=0)."""

    def __init__(self, config: LocalEngineConfig | None = None, **options: Any) -> None:
        self.config = config or LocalEngineConfig(**options)

    @property
    def workers(self) -> int:
        w = self.config.workers
        return (os.cpu_count() or 1) if w is None else w

    def _executor(self) -> Executor:
        if self.workers == 0:
            return _InlineExecutor()
        if self.config.executor == "threads":
            return ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="dataferry-task")
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=worker_context())

    @property
    def shares_store(self) -> bool:
        """Attempts run on the driver's own store object (inline or threads): their store
        statistics are already counted there."""
        return self.workers == 0 or self.config.executor == "threads"

    def _close_executor(self, executor: Executor) -> None:
        executor.shutdown(wait=True, cancel_futures=True)

    def run_job(
        self,
        committer: Committer,
        tasks: Sequence[TaskWork] | TaskFeed,
        *,
        job_id: JobId | None = None,
        on_event: EventHook | None = None,
        before_job_commit: Callable[[JobContext], None] | None = None,
    ) -> JobRun:
        """Set up, run every task to a committed attempt, and commit the job.

        `tasks` is a list, or a TaskFeed whose tasks arrive while the job runs (a stream).
        A task that uses up its attempts aborts the job and raises TaskFailed; an attempt
        that fails with a ConfigError (bad input or options, the same in every attempt)
        aborts the job at once and raises that error, with no retry; a feed whose
        producer fails aborts the job and raises the producer's error; a failing job
        commit aborts the job and raises JobCommitError; any other error of the driver (an
        event hook's, an interrupt) aborts the job and propagates. An InjectedCrash in the driver (job
        setup or commit) propagates untouched: the driver died.
        """
        if not isinstance(tasks, TaskFeed) and not tasks:
            raise EngineError("a job needs at least one task")
        session = new_session(committer, job_id)
        start = time.perf_counter()
        job = session.setup().context
        setup_s = session.setup_s
        driver = _Driver(self.config, session, tasks, on_event or (lambda *a: None))
        executor = self._executor()
        try:
            with _main_without_phantom_file():
                driver.run(executor)
        except FeedFailed as e:
            driver.drain()
            session.abort()
            raise e.error from None
        except (Exception, KeyboardInterrupt):  # TaskFailed, ConfigError, a hook, Ctrl-C...
            session.abort()  # (an InjectedCrash is the driver dying: no abort)
            raise
        finally:
            self._close_executor(executor)
        write_s = time.perf_counter() - start
        try:
            if before_job_commit is not None:
                before_job_commit(job)
            driver.emit("job_commit_started", -1, -1)
        except (Exception, KeyboardInterrupt):
            session.abort()
            raise
        messages = [driver.messages[i] for i in sorted(driver.messages)]
        result = session.commit(messages)
        job_commit_s = session.commit_s
        driver.emit("job_committed", -1, -1)
        committer.stats.merge(driver.committer_stats)
        store_stats = IOStatistics(committer.store.stats.snapshot())
        if not self.shares_store:
            store_stats.merge(driver.worker_store_stats)
        return JobRun(
            job=job,
            commit=result,
            messages=messages,
            results=driver.results,
            attempts=driver.launched_total,
            failed_attempts=driver.failed_total,
            speculative_attempts=driver.speculative_total,
            denied_commits=driver.denied_total,
            write_s=write_s,
            job_commit_s=job_commit_s,
            wall_s=time.perf_counter() - start,
            task_commit_s=driver.task_commit_s,
            store_stats=store_stats,
            committer_stats=committer.stats,
            errors=dict(driver.errors),
            setup_s=setup_s,
        )


class _Driver:
    """The scheduling loop of one job: launches, commits, retries, speculates."""

    def __init__(
        self,
        config: LocalEngineConfig,
        session: Job,
        tasks: Sequence[TaskWork] | TaskFeed,
        emit: EventHook,
    ) -> None:
        self.config = config
        self.committer = session.committer
        self.job = session.context
        self.feed = tasks if isinstance(tasks, TaskFeed) else None
        self.tasks: list[TaskWork] = [] if self.feed is not None else list(tasks)  # type: ignore[arg-type]
        self.emit = emit
        self.coordinator = session.coordinator  # the session's: one attempt per task
        self.failures = {(f.task, f.attempt): f.when for f in config.failures}
        self.next_attempt: dict[int, int] = defaultdict(int)
        self.running: dict[int, set[int]] = defaultdict(set)
        self.started: dict[tuple[int, int], float] = {}
        self.speculated: set[int] = set()
        self.durations: list[float] = []
        self.messages: dict[int, TaskCommitMessage] = {}
        self.results: dict[int, Any] = {}
        self.done: set[int] = set()
        self.errors: dict[int, list[str]] = defaultdict(list)
        self.pool: AttemptPool[tuple[str, TaskAttemptContext]] | None = None
        self.launched_total = self.failed_total = self.speculative_total = self.denied_total = 0
        self.task_commit_s = 0.0
        self.worker_store_stats = IOStatistics()
        self.committer_stats = IOStatistics()

    def run(self, executor: Executor) -> None:
        self.pool = pool = AttemptPool(executor, self.config.max_attempts)
        for i in range(len(self.tasks)):
            self.start(i)
        while pool or (self.feed is not None and not self.feed.done):
            if self.feed is not None and not self.feed.done:
                # wait on the feed only when nothing runs that could need the driver
                for work in self.feed.take(timeout=0 if pool else 0.05):
                    self.tasks.append(work)
                    self.start(len(self.tasks) - 1)
            for (kind, ctx), fut in pool.finished(timeout=0.05):
                self.handle(kind, ctx, fut)
            self.maybe_speculate()

    def start(self, i: int) -> None:
        self.launch(i)
        if i in self.config.speculate_tasks:
            self.launch(i, speculative=True)

    # --- launching -------------------------------------------------------------------------

    def launch(self, i: int, speculative: bool = False) -> None:
        n = self.next_attempt[i]
        self.next_attempt[i] += 1
        ctx = self.job.task(i, n)
        self.running[i].add(n)
        self.started[(i, n)] = time.perf_counter()
        self.launched_total += 1
        if speculative:
            self.speculated.add(i)
            self.speculative_total += 1
        self.emit("attempt_speculative" if speculative else "attempt_started", i, n)
        failure = self.failures.get((i, n))
        self.submit("run", ctx, run_attempt, ctx, self.tasks[i], _only(failure, "after_write"))

    def submit(self, kind: str, ctx: TaskAttemptContext, fn: Callable, *args: Any) -> None:
        assert self.pool is not None, "run() first"
        self.pool.submit((kind, ctx), fn, *args)

    # --- completions -----------------------------------------------------------------------

    def handle(self, kind: str, ctx: TaskAttemptContext, fut: Future) -> None:
        i, n = ctx.task_index, ctx.attempt_number
        exc = fut.exception()
        if kind == "run":
            self.running[i].discard(n)
            if exc is not None:
                self.attempt_failed(ctx, exc)
                return
            report = self.counted(fut)
            if i in self.done:
                self.deny(ctx)
            elif not report.needs_commit:
                self.finish(i, n, None, report.result)
            elif self.coordinator.can_commit(i, n):
                self.results[i] = report.result
                self.running[i].add(n)
                self.started[(i, n, "commit")] = time.perf_counter()  # type: ignore[index]
                failure = self.failures.get((i, n))
                self.submit(
                    "commit",
                    ctx,
                    commit_attempt,
                    ctx,
                    _only(failure, "during_commit"),
                    report.written,
                )
            else:
                self.deny(ctx)
        elif kind == "commit":
            self.running[i].discard(n)
            self.task_commit_s += time.perf_counter() - self.started.pop((i, n, "commit"))  # type: ignore[arg-type]
            if exc is not None:
                self.coordinator.attempt_failed(i, n)
                self.attempt_failed(ctx, exc)
                return
            report = self.counted(fut)
            self.coordinator.task_committed(i, n)
            self.finish(i, n, report.message, self.results.get(i))
        elif kind == "abort" and exc is None:
            self.committer_stats.merge(fut.result())

    def counted(self, fut: Future) -> Any:
        """A finished attempt's report (of its run or its commit), its worker's store and
        committer statistics added to the job's."""
        report = fut.result()
        self.worker_store_stats.merge(report.store_stats)
        self.committer_stats.merge(report.committer_stats)
        return report

    def deny(self, ctx: TaskAttemptContext) -> None:
        self.denied_total += 1
        self.emit("commit_denied", ctx.task_index, ctx.attempt_number)
        self.submit("abort", ctx, abort_attempt, ctx)

    def finish(self, i: int, n: int, message: TaskCommitMessage | None, result: Any) -> None:
        self.done.add(i)
        if message is not None:
            self.messages[i] = message
        self.results[i] = result
        self.durations.append(time.perf_counter() - self.started[(i, n)])
        self.emit("task_committed", i, n)

    def attempt_failed(self, ctx: TaskAttemptContext, exc: BaseException) -> None:
        i, n = ctx.task_index, ctx.attempt_number
        self.failed_total += 1
        self.coordinator.attempt_failed(i, n)
        self.errors[i].append(f"{ctx.attempt_id}: {type(exc).__name__}: {exc}")
        self.emit("attempt_failed", i, n)
        if i not in self.done and deterministic(exc):
            # bad input or options: every attempt would fail the same way, so the job fails
            # now, with the error itself (not after max_attempts retries of it)
            self.drain()
            raise exc
        if i in self.done or self.running[i]:
            return  # another attempt is still going, or the task is already committed
        assert self.pool is not None  # attempts fail only while run() handles them
        if not self.pool.may_retry(self.next_attempt[i]):
            self.drain()
            raise TaskFailed(
                f"task {ctx.task_id} failed {self.next_attempt[i]} times "
                f"(max_attempts={self.config.max_attempts}); last error: {self.errors[i][-1]}",
                self.errors[i],
            )
        self.launch(i)

    def drain(self) -> None:
        """Let attempts in flight finish (they are not committed) before the job aborts."""
        if self.pool is not None:
            self.pool.drain()

    # --- speculation -----------------------------------------------------------------------

    def maybe_speculate(self) -> None:
        c = self.config
        if not c.speculation or not self.durations:
            return
        if self.feed is not None and not self.feed.done:
            return  # the quantile is of every task, not of those known so far
        if len(self.done) < c.speculation_quantile * len(self.tasks):
            return
        threshold = c.speculation_multiplier * statistics.median(self.durations)
        now = time.perf_counter()
        for i in range(len(self.tasks)):
            if i in self.done or i in self.speculated or len(self.running[i]) != 1:
                continue
            (n,) = tuple(self.running[i])
            if now - self.started[(i, n)] > threshold:
                self.launch(i, speculative=True)


@contextmanager
def _main_without_phantom_file() -> Iterator[None]:
    """A `__main__` read from stdin has `__file__ == "<stdin>"`, which worker start-up would
    try to import; hide such a name while workers start (a real script file is kept)."""
    main = sys.modules.get("__main__")
    phantom = getattr(main, "__file__", None)
    if phantom is None or os.path.exists(phantom):
        yield
        return
    del main.__file__  # type: ignore[union-attr]
    try:
        yield
    finally:
        main.__file__ = phantom  # type: ignore[union-attr]


def _only(failure: str | None, point: str) -> str | None:
    return failure if failure == point else None
