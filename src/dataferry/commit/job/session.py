"""One job session for every engine: the driver's lifecycle of a write job, written once.

    with dataferry.open_job("out/", committer="manifest") as job:   # set up, driver recorded
        attempt = job.task(0, 0)            # picklable: any worker can use it, alone
        attempt.setup(); attempt.write("part-0.bin", b"...")
        if job.can_commit(0, 0):            # the driver's coordinator: one attempt per task
            message = attempt.commit()
        result = job.commit([message])      # exactly the committed attempts; or abort, raise

An exception inside the block aborts the job (nothing of it stays visible); the driver
record ends either way. An `InjectedCrash` (the driver "died") propagates untouched: no
abort, the record stays for `dataferry cleanup` to find. Engines whose setup and commit run
in different places (a Dask graph's tasks, Ray's datasink callbacks) use the same object
without the block: `new_session`, `Job.setup`, `Job.commit`, `Job.abort`, `Job.end`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, BinaryIO

from ...errors import CommitError, ConfigError, InjectedCrash, JobCommitError, TaskCommitError
from ...ids import JobId, parse_task_attempt_id
from ...store import Store
from ..base import Committer
from ..coordinator import CommitCoordinator
from ..lookup import committer_for
from ..protocol import JobCommitResult, JobContext, TaskAttemptContext, TaskCommitMessage
from ..records.drivers import end_driver
from .commit import job_ended, record_job_driver

log = logging.getLogger("dataferry.commit")


class TaskAttempt:
    """One task attempt of a job: set it up, write its files, commit or abort it.

    Picklable, and needs nothing else: a worker rebuilds the job's committer from the
    context. The paths it wrote travel with it (`written`), so an engine may run the writes
    in one call and the commit in another, even in another process."""

    def __init__(self, ctx: TaskAttemptContext, committer: Committer | None = None) -> None:
        self.ctx = ctx
        self._committer = committer
        self.files: list[str] = []  # the paths as the task named them
        self.written: list[str] = []  # what the committer made of each (its output path)
        self.bytes = 0

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_committer"] = None  # rebuilt on the worker from the context
        return state

    @property
    def committer(self) -> Committer:
        if self._committer is None:
            self._committer = committer_for(self.ctx)  # type: ignore[assignment]
        return self._committer  # type: ignore[return-value]

    @property
    def job_id(self) -> str:
        return str(self.ctx.job.job_id)

    @property
    def job_uuid(self) -> str:
        return self.ctx.job.job_uuid

    @property
    def task_index(self) -> int:
        return self.ctx.task_index

    @property
    def attempt_number(self) -> int:
        return self.ctx.attempt_number

    def setup(self) -> None:
        """Set the attempt up (refused for an attempt id already in use: an engine's rerun)."""
        self.committer.setup_task(self.ctx)

    def announce(self, relpaths: Sequence[str]) -> None:
        """The files this attempt is about to write (see `CommitterHooks.announce_files`)."""
        self.committer.announce_files(self.ctx, list(relpaths))

    def write(self, relpath: str, data: bytes) -> None:
        """Write one output file; `relpath` is relative to the destination."""
        self.committer.write_file(self.ctx, relpath, data)
        self.written.append(self.committer.output_path(self.ctx, relpath))
        self.files.append(relpath)
        self.bytes += len(data)

    def open(self, relpath: str) -> BinaryIO:
        """A stream for one output file, published to the attempt when it closes."""
        self.files.append(relpath)
        self.written.append(self.committer.output_path(self.ctx, relpath))
        return self.committer.open_file(self.ctx, relpath)

    def needs_commit(self) -> bool:
        return self.committer.needs_task_commit(self.ctx)

    def commit(self) -> TaskCommitMessage:
        """Commit the attempt (only once the driver's `Job.can_commit` said yes). An attempt
        whose job ended while it ran removes its output and raises TaskCommitError."""
        committer = self.committer
        message = committer.commit_task(self.ctx, tuple(self.written))
        if job_ended(self.ctx.job):  # the job was aborted (or committed) while this ran
            self.abort(quiet=True)
            committer.sweep_late_attempts(self.ctx.job)
            raise TaskCommitError(
                f"{self.ctx.attempt_id}: job {self.ctx.job.job_id} ended while the attempt "
                "ran; its output is removed"
            )
        return message

    def abort(self, quiet: bool = False) -> None:
        """Remove what the attempt wrote (a denied, failed or speculative loser)."""
        try:
            self.committer.abort_task(self.ctx)
        except Exception:
            if not quiet:
                raise


class Job:
    """The driver's side of one write job: its committer, its context and its coordinator.

    States: `new` (not set up), `open` (set up), then `committed` or `aborted`; `end` stops
    the driver record. Picklable (the coordinator stays on the driver)."""

    def __init__(self, committer: Committer, context: JobContext) -> None:
        self.committer = committer
        self.context = context
        self.state = "new"
        self.setup_s = 0.0
        self.commit_s = 0.0
        self._coordinator: CommitCoordinator | None = CommitCoordinator()

    @classmethod
    def set_up(cls, committer: Committer, context: JobContext) -> Job:
        """The session of a job already set up elsewhere (a Dask graph's setup task)."""
        job = cls(committer, context)
        job.state = "open"
        return job

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_coordinator"] = None  # one per driver: a copy elsewhere starts its own
        return state

    @property
    def coordinator(self) -> CommitCoordinator:
        if self._coordinator is None:
            self._coordinator = CommitCoordinator()
        return self._coordinator

    @property
    def job_id(self) -> JobId:
        return self.context.job_id

    @property
    def job_uuid(self) -> str:
        return self.context.job_uuid

    @property
    def store(self) -> Store:
        return self.context.store

    # --- lifecycle -------------------------------------------------------------------------

    def setup(self, *, record_driver: bool = True, rerun: bool = False) -> Job:
        """Set the job up and (by default) record this process as its driver. `rerun`: a
        job already set up (an engine ran its setup again) is kept, not refused."""
        start = time.perf_counter()
        try:
            self.committer.setup_job(self.context)
        except CommitError:
            if not (rerun and _set_up(self.committer, self.context)):
                raise
        if record_driver:
            self.record_driver()
        self.state = "open"
        self.setup_s = time.perf_counter() - start
        return self

    def record_driver(self) -> JobContext:
        """Record this process as the job's driver (before setup too: a Dask graph's client)."""
        self.context = record_job_driver(self.committer, self.context)
        return self.context

    def task(self, task_id: int, attempt: int = 0) -> TaskAttempt:
        """The picklable context of attempt `attempt` of task `task_id`."""
        return TaskAttempt(self.context.task(task_id, attempt))

    def can_commit(self, task_id: int, attempt: int) -> bool:
        """The coordinator's word: may this attempt commit? (First to ask wins the task.)"""
        return self.coordinator.can_commit(task_id, attempt)

    def attempt_failed(self, task_id: int, attempt: int) -> None:
        """An attempt died or its commit failed: a later attempt of the task may commit."""
        self.coordinator.attempt_failed(task_id, attempt)

    def task_committed(self, task_id: int, attempt: int) -> None:
        self.coordinator.task_committed(task_id, attempt)

    def commit(self, messages: Sequence[TaskCommitMessage | None]) -> JobCommitResult:
        """Commit exactly the committed attempts among `messages` (one per task: the
        coordinator's; a message of another attempt of a committed task is left out), or
        abort the job (nothing of it stays visible) and raise JobCommitError."""
        if self.state not in ("new", "open"):
            raise JobCommitError(f"job {self.job_id}: commit of a job already {self.state}")
        kept = self._one_per_task([m for m in messages if m is not None])
        t = time.perf_counter()
        try:
            result = self.committer.commit_job(self.context, kept)
        except Exception as e:  # not an InjectedCrash (a BaseException: the driver died)
            self.abort(quiet=True)
            if isinstance(e, JobCommitError):
                raise
            raise JobCommitError(f"job {self.job_id}: job commit failed: {e}") from e
        self.state = "committed"
        self.commit_s = time.perf_counter() - t
        return result

    def abort(self, quiet: bool = False) -> None:
        """Undo the job (or finish a decided one); its driver record ends. Once only."""
        if self.state in ("committed", "aborted"):
            return
        self.state = "aborted"
        try:
            self.committer.abort_job(self.context)
        except Exception:
            if not quiet:
                raise

    def end(self) -> None:
        """Stop the driver record's heartbeat and remove it (a committed or aborted job's is
        gone already; this stops a renewal that another process's commit left running)."""
        end_driver(self.store, self.job_uuid)

    def __enter__(self) -> Job:
        if self.state == "new":
            self.setup()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(error, InjectedCrash):
            return  # the driver died: no abort, its record stays for cleanup to judge
        try:
            if kind is not None:
                self.abort(quiet=True)  # the block's error is the one the caller sees
            elif self.state == "open":  # left without a commit: abandoned, so undone
                log.info("job %s: the block ended without a commit; aborted", self.job_id)
                self.abort()
        finally:
            self.end()

    def _one_per_task(self, messages: Sequence[TaskCommitMessage]) -> list[TaskCommitMessage]:
        kept: dict[int, TaskCommitMessage] = {}
        for m in messages:
            aid = parse_task_attempt_id(m.attempt_id)
            i, n = aid.task.index, aid.number
            committed = self.coordinator.committed_attempt(i)
            if committed is None and self.coordinator.can_commit(i, n):
                self.coordinator.task_committed(i, n)
                committed = n
            if committed != n or i in kept:
                log.info(
                    "job %s: left out %s (task %d committed by attempt %s)",
                    self.job_id,
                    m.attempt_id,
                    i,
                    committed,
                )
                continue
            kept[i] = m
        return [kept[i] for i in sorted(kept)]


def _set_up(committer: Committer, job: JobContext) -> bool:
    try:
        return job.store.exists(committer.job_dir(job))
    except Exception:
        return False


def new_session(committer: Committer, job_id: JobId | None = None) -> Job:
    """A job of `committer` not yet set up (`Job.setup`, or enter it with `with`)."""
    return Job(committer, committer.new_job(job_id))


def open_job(
    target: Committer | Store | str | os.PathLike[str],
    *,
    job_id: JobId | None = None,
    committer: str = "auto",
    record_driver: bool = True,
    **options: Any,
) -> Job:
    """Open a write job on a committer, or on a destination (a URL, path or Store) with the
    committer named by `committer` (`make_committer`'s options in `options`): the job is set
    up and this process recorded as its driver. Use it as a context manager: an exception
    in the block aborts the job, and the driver record ends either way."""
    if isinstance(target, Committer):
        if options or committer != "auto":
            raise ConfigError(
                f"open_job was given committer {target.name!r} itself; committer options "
                f"({', '.join(sorted(options)) or 'committer='}) go to make_committer, pass "
                "a destination instead"
            )
        chosen = target
    else:
        from ..factory import make_committer

        chosen = make_committer(committer, target, **options)
    return new_session(chosen, job_id).setup(record_driver=record_driver)
