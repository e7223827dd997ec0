"""The dataset layer's driver of a Dask write: a `WriteRequest` (see `dataset/options.py`) written
from a Dask DataFrame, in either of two forms, and the tasks that run on Dask's workers.

`write_graph` (behind `dataferry.dask.to_parquet`) builds one Dask graph, as
`dask.dataframe.to_parquet` does, and runs on any Dask scheduler:

    setup_job_task  ->  write_partition_task (one per partition)  ->  commit_job_task

The setup task checks the destination for the write mode and sets the job up. Each write task
is fused with the computation of its partition (it is `map_partitions` over the frame), so a
partition is written where it is computed, as it is computed: nothing is gathered to the client
and no copy is kept. A write task runs one task attempt from set-up to task commit and returns a
small `TaskDone` (its commit message and counts). The commit task receives exactly one
`TaskDone` per partition, the one Dask kept, and commits the job with those messages; committed
attempts of the same task that Dask did not keep (a rerun after a worker was thought dead) are
zombies, and the job commit cleans them up.

Attempt numbers: Dask reruns a task with the same arguments (after a worker died, or when
`retries=` retries a failure), so each execution of a write task finds its own number: the
lowest one whose attempt is not set up, skipping numbers whose work directory exists and
numbers the committer refuses to set up twice (manifest, magic, staging keep that record until
the job ends). So a run never shares an attempt, or its directory, with a dead or still running
run. A number is taken again only once its attempt's work directory is gone: the attempt aborted
itself, or (v1, v2) its task commit moved the directory away; either way it is over, and cannot
be a zombie. The direct committer has no work directory, so its reruns keep attempt 0.

`write_with_driver` (behind `dataferry.dask.write_dataset`) runs the embedded engine's driver
(coordinator, retries, speculation) on a distributed Client, fed partitions lazily by
`PartitionFeed`.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..commit.base import Committer
from ..commit.destination import prepare_destination
from ..commit.job.session import Job, new_session
from ..commit.lookup import committer_for
from ..commit.protocol import JobContext, TaskAttemptContext, TaskCommitMessage
from ..dataset.options import WriteRequest
from ..dataset.write import (
    WriteResult,
    check_existing_data,
    check_partition_columns,
    check_services_reachable,
    committer_write_options,
    open_destination,
    prepare_write,
    raise_in_callers_words,
    write_committer,
    write_fed,
    write_result,
)
from ..engine.attempt import AttemptReport, TaskOutput, commit_attempt, run_attempt
from ..engine.feed import TaskFeed
from ..engine.local import EventHook, JobRun, LocalEngineConfig
from ..errors import CommitError, ConfigError, DestinationError, EngineError
from ..stats import IOStatistics
from .driver import DaskEngine
from .frame import (
    NONE_LABEL,
    FrameSpec,
    WriteSpec,
    dask_filesystem,
    empty_schema_file,
    frame_spec,
    index_is_written,
    schema_of,
    write_frame,
)

# attempt numbers a write task tries before giving up (each skipped one is an earlier run)
MAX_ATTEMPT_NUMBERS = 64
ModeWords = tuple[tuple[str, str], ...]  # WriteRequest.mode_words


# --- the graph's tasks ----------------------------------------------------------------------------


def _store_token(job: JobContext) -> tuple[int, int]:
    """Which store object a task's statistics were counted on (threads share the client's)."""
    return (os.getpid(), id(job.store))


@dataclass(frozen=True)
class JobStarted:
    """The setup task's result: the job, when it started, and its store's counts then."""

    job: JobContext
    started: float
    store_before: dict[str, Any]
    store_token: tuple[int, int]


@dataclass
class TaskDone:
    """A write task's result: one committed attempt of one task (small: no data)."""

    index: int
    attempt: int
    message: TaskCommitMessage | None
    result: dict[str, Any]
    write_s: float
    commit_s: float
    store_stats: dict[str, Any] = field(default_factory=dict)
    committer_stats: dict[str, Any] = field(default_factory=dict)
    store_token: tuple[int, int] = (0, 0)
    started: JobStarted | None = None  # the setup task's result the write ran after


def setup_job_task(committer: Committer, job: JobContext, mode_words: ModeWords = ()) -> JobStarted:
    """The graph's first task: check the destination for the write mode (creating it), then
    set the job up. Dask may run it again (its result lost with a worker): the job id is this
    graph's own, so a job that is already set up is this task's earlier run, and is kept.
    A destination refused for the mode is refused in the caller's words (`mode_words`)."""
    before = job.store.stats.snapshot()
    started = time.time()
    try:
        prepare_destination(job.store, committer.write_mode)
    except DestinationError as e:
        raise_in_callers_words(mode_words, e)
    Job(committer, job).setup(rerun=True)
    return JobStarted(job, started, before, _store_token(job))


def run_fresh_attempt(
    job: JobContext, index: int, work: Callable[[TaskOutput], Any]
) -> tuple[TaskAttemptContext, AttemptReport]:
    """Run task `index` as a new attempt: the lowest attempt number no earlier execution set
    up (see the module's docstring). Returns the attempt and its phase-1 report."""
    committer = committer_for(job)
    refused: list[str] = []
    for number in range(MAX_ATTEMPT_NUMBERS):
        ctx = job.task(index, number)
        work_path = committer.task_work_path(ctx)
        if work_path and job.store.exists(work_path):
            continue  # an earlier execution's: it died, or it still runs (a zombie)
        began = False

        def tracked(out: TaskOutput) -> Any:
            nonlocal began
            began = True
            return work(out)

        try:
            return ctx, run_attempt(ctx, tracked)
        except CommitError as e:
            if began:
                raise
            refused.append(str(e))  # the committer refused the id: another execution's
    raise EngineError(
        f"task {index} of job {job.job_id}: no free attempt number below "
        f"{MAX_ATTEMPT_NUMBERS}" + (f"; last refusal: {refused[-1]}" if refused else "")
    )


def write_partition_task(
    pdf: Any, started: JobStarted, spec: WriteSpec, partition_info: dict[str, Any] | None = None
) -> TaskDone:
    """One write task (run by `map_partitions`, fused with the partition's computation): a
    fresh attempt writes the partition and commits itself."""
    if partition_info is None:
        raise EngineError("write_partition_task needs Dask's partition_info")
    index = int(partition_info["number"])
    job = started.job
    work = spec.work(pdf)
    t = time.perf_counter()
    ctx, report = run_fresh_attempt(job, index, work)
    write_s = time.perf_counter() - t
    store_stats = IOStatistics(report.store_stats)
    committer_stats = IOStatistics(report.committer_stats)
    message = None
    t = time.perf_counter()
    if report.needs_commit:
        commit = commit_attempt(ctx, written=report.written)
        message = commit.message
        store_stats.merge(commit.store_stats)
        committer_stats.merge(commit.committer_stats)
    return TaskDone(
        index=index,
        attempt=ctx.attempt_number,
        message=message,
        result=report.result,
        write_s=write_s,
        commit_s=time.perf_counter() - t,
        store_stats=store_stats.snapshot(),
        committer_stats=committer_stats.snapshot(),
        store_token=_store_token(job),
        started=started,
    )


def commit_job_task(
    committer: Committer,
    started: JobStarted,
    done: Sequence[TaskDone],
    mode_words: ModeWords = (),
) -> WriteResult:
    """The graph's last task: commit the job with one message per task. A failed job commit
    aborts the job (nothing of it stays visible) and raises JobCommitError (a destination
    refused for the mode: DestinationError, in the caller's words)."""
    job = started.job
    done = sorted(done, key=lambda d: d.index)
    if [d.index for d in done] != list(range(len(done))):
        raise EngineError(f"job {job.job_id}: write results {[d.index for d in done]}")
    messages = [d.message for d in done if d.message is not None]
    write_s = time.time() - started.started
    commit_before = committer.store.stats.snapshot()
    session = Job.set_up(committer, job)
    try:
        result = session.commit(messages)
    except DestinationError as e:
        raise_in_callers_words(mode_words, e)
    job_commit_s = session.commit_s
    for d in done:
        committer.stats.merge(d.committer_stats)
    # one store object for every task (threads, sync): its own counts since setup are exact;
    # otherwise each task's counts were taken on its own copy of the store and are added up
    token = _store_token(job)
    if started.store_token == token and all(d.store_token == token for d in done):
        store_stats = IOStatistics(job.store.stats.diff(started.store_before))
        if committer.store is not job.store:
            store_stats.merge(committer.store.stats.diff(commit_before))
    else:
        store_stats = IOStatistics(committer.store.stats.diff(commit_before))
        for d in done:
            store_stats.merge(d.store_stats)
    attempts = sum(d.attempt + 1 for d in done)
    run = JobRun(
        job=job,
        commit=result,
        messages=messages,
        results={d.index: d.result for d in done},
        attempts=attempts,
        failed_attempts=attempts - len(done),
        speculative_attempts=0,
        denied_commits=0,
        write_s=write_s,
        job_commit_s=job_commit_s,
        wall_s=time.time() - started.started,
        task_commit_s=sum(d.commit_s for d in done),
        store_stats=store_stats,
        committer_stats=committer.stats,
    )
    stats = {"tasks": len(done), "engine": "dask-graph", "attempt_numbers_used": attempts}
    return write_result(job.store, committer, run, stats)


def commit_after_writes(
    committer: Committer, done: Sequence[TaskDone], mode_words: ModeWords = ()
) -> WriteResult:
    """`commit_job_task` with the setup task's result the write tasks ran after."""
    started = next(d.started for d in done if d.started is not None)
    return commit_job_task(committer, started, done, mode_words)


# --- write_dataset: partitions fed lazily to the engine's driver --------------------------------------


def bind_partition(pdf: Any, spec: WriteSpec) -> functools.partial:
    """A partition as a task's work (computed on a worker; stays there)."""
    return spec.work(pdf)


class PartitionFeed:
    """Partitions computed on a distributed Client as the driver needs them.

    A producer thread computes the work of partition i (its partition bound to the write) as
    a Future and puts it into a TaskFeed; at most `window` of them are held at once, and a
    task's Future is released when the task commits, so the cluster holds at most `window`
    partitions, each once. A retried or speculative attempt reuses its task's Future; if the
    worker holding it died, Dask recomputes it from the graph.
    """

    def __init__(self, client: Any, ddf: Any, spec: WriteSpec, window: int) -> None:
        if window < 1:
            raise ConfigError(f"window must be >= 1, got {window}")
        self.client = client
        self.window = window
        works = ddf.map_partitions(
            bind_partition, spec, meta=("work", object), enforce_metadata=False
        )
        self._parts = works.to_delayed(optimize_graph=True)
        self._slots = threading.Semaphore(window)
        self._held: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.max_held = 0
        self.feed = TaskFeed()

    def start(self) -> TaskFeed:
        self._thread = threading.Thread(
            target=self._produce, name="dataferry-dask-feed", daemon=True
        )
        self._thread.start()
        return self.feed

    def _produce(self) -> None:
        try:
            for i, part in enumerate(self._parts):
                while not self._slots.acquire(timeout=0.1):
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                future = self.client.compute(part)
                with self._lock:
                    self._held[i] = future
                    self.max_held = max(self.max_held, len(self._held))
                self.feed.put(future)
            self.feed.close()
        except BaseException as e:
            self.feed.close(e)

    def on_event(self, event: str, task: int, attempt: int) -> None:
        """The driver's events: a committed task's partition is let go."""
        if event != "task_committed":
            return
        with self._lock:
            future = self._held.pop(task, None)
        if future is not None:
            future.release()
            self._slots.release()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for future in held:
            future.release()

    def stats(self) -> dict[str, Any]:
        return {
            "tasks": len(self._parts),
            "engine": "dask-driver",
            "window": self.window,
            "max_partitions_held": self.max_held,
        }


# --- the two forms of a Dask write --------------------------------------------------------------


def write_graph(
    df: Any,
    request: WriteRequest,
    *,
    write_index: bool | None = None,
    schema: Any = "infer",
    compute: bool = True,
    compute_kwargs: dict[str, Any] | None = None,
) -> Any:
    """Write `df` as one Dask graph (setup, a write task per partition, commit): the result,
    or with ``compute=False`` a Delayed that computes to it and touches nothing before. Only
    the checks run now; a computation that fails aborts the job before raising."""
    import dask

    frame = frame_spec(df, write_index, schema)
    schema_in = schema_of(df, frame)
    check_partition_columns(schema_in, request.partition_by)
    dest, filesystem = dask_filesystem(request.dest, request.filesystem)
    # nothing below writes to the store: the destination is checked by the setup task (a
    # table committer reads the table to check the frame's schema against it)
    store = open_destination(dest, filesystem, request.storage_options)
    committer = write_committer(request, store)
    committer.prepare_input(schema_in, request.partition_by)
    check_existing_data(store, committer, request, schema_in)  # a plain data set's layout
    session = new_session(committer)
    if compute:  # this process drives the job: its record tells cleanup and late tasks
        session.record_driver()
    job = session.context
    options = committer_write_options(request.options, committer)
    spec = WriteSpec(
        request.partition_by, options, frame, empty_schema_file(store, committer, request)
    ).keyed(committer, schema_in)
    name, words = f"dataferry-{job.job_uuid[:8]}", request.mode_words
    setup = dask.delayed(functools.partial(setup_job_task, committer, job, words), pure=False)
    started = setup(dask_key_name=f"{name}-setup")
    writes = df.map_partitions(
        functools.partial(write_partition_task, spec=spec),
        started,
        meta=("written", object),
        enforce_metadata=False,
        align_dataframes=False,
        token=f"{name}-write",
    ).to_delayed(optimize_graph=True)
    # the commit takes the job's start from the writes: Dask gives `map_partitions` a copy
    # of the setup task under a key of its own, and a second run would find the writes' files
    commit = dask.delayed(
        functools.partial(commit_after_writes, committer, mode_words=words), pure=False
    )(writes, dask_key_name=f"{name}-commit")
    if not compute:
        return commit
    try:
        (result,) = dask.compute(commit, **dict(compute_kwargs or {}))
    except BaseException:
        session.abort(quiet=True)  # (an error here must not hide the computation's)
        raise
    session.end()  # (the commit task removed the record; this stops its renewal)
    return result


def default_window(engine: DaskEngine) -> int:
    """Partitions held at once by default: two per worker thread (one being written, the
    next computed), so that every thread of every worker has a task to encode."""
    return 2 * engine.threads


def write_with_driver(
    ddf: Any,
    request: WriteRequest,
    *,
    write_index: bool | None = None,
    schema: Any = "infer",
    client: Any = None,
    config: LocalEngineConfig | None = None,
    window: int | None = None,
    on_event: EventHook | None = None,
    before_job_commit: Callable[[Any], None] | None = None,
) -> WriteResult:
    """Write `ddf` with the embedded engine's driver on a distributed Client (`client`, or
    the current one): partitions computed on the workers as their tasks are launched, at
    most `window` at a time (default: twice the workers' threads, so every thread has a
    partition to write and the next one computed)."""
    frame = frame_spec(ddf, write_index, schema)
    engine = DaskEngine(client, config)
    schema_in = schema_of(ddf, frame)
    store, committer = prepare_write(request, schema_in)
    check_services_reachable(committer, engine.worker_hosts())
    feed = PartitionFeed(
        engine.client,
        ddf,
        WriteSpec(
            request.partition_by,
            committer_write_options(request.options, committer),
            frame,
            empty_schema_file(store, committer, request),
        ).keyed(committer, schema_in),
        window or default_window(engine),
    )
    return write_fed(store, committer, engine, feed, on_event, before_job_commit)


__all__ = [
    "NONE_LABEL",
    "FrameSpec",
    "PartitionFeed",
    "WriteSpec",
    "commit_job_task",
    "frame_spec",
    "index_is_written",
    "setup_job_task",
    "write_frame",
    "write_graph",
    "write_partition_task",
    "write_with_driver",
]
