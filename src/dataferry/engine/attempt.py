"""What runs on a worker for one task attempt, in two phases.

Phase 1 (`run_attempt`): set up the attempt and run the task's work, which writes files through
`TaskOutput`. Phase 2 (`commit_attempt`), only once the driver's coordinator authorised it:
commit the attempt. `abort_attempt` is the denied or failed attempt's clean-up. Each function
needs nothing but the picklable context, so any engine can run it anywhere.

A crash (InjectedCrash) or an injected death inside an attempt is reported as `AttemptDied`:
the process running it is gone, so no abort runs for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..commit.base import Committer
from ..commit.job.commit import job_ended
from ..commit.job.session import TaskAttempt
from ..commit.lookup import committer_for
from ..commit.protocol import TaskAttemptContext, TaskCommitMessage
from ..errors import EngineError, InjectedCrash, TaskCommitError
from ..store import FaultRule, FaultStore, Op

FailurePoint = Literal["after_write", "during_commit"]


class AttemptDied(EngineError):
    """The attempt's process died (a crash or an injected death)."""


@dataclass(frozen=True)
class AttemptFailure:
    """Inject a death into one attempt: after it wrote its files, or half way through its
    task commit (just after the commit's first change to the store took effect)."""

    task: int
    attempt: int = 0
    when: FailurePoint = "after_write"


class TaskOutput(TaskAttempt):
    """The handle a task's work writes through: the session's task attempt
    (`commit/job/session.py`), bound to the worker's committer."""

    def __init__(self, committer: Committer, ctx: TaskAttemptContext) -> None:
        super().__init__(ctx, committer)


TaskWork = Callable[[TaskOutput], Any]


@dataclass
class AttemptReport:
    """Phase 1's answer to the driver."""

    needs_commit: bool
    written: tuple[str, ...] = ()
    files: int = 0
    bytes: int = 0
    result: Any = None
    store_stats: dict[str, Any] = field(default_factory=dict)
    committer_stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class CommitReport:
    message: TaskCommitMessage
    store_stats: dict[str, Any] = field(default_factory=dict)
    committer_stats: dict[str, Any] = field(default_factory=dict)


def run_attempt(
    ctx: TaskAttemptContext, work: TaskWork, failure: FailurePoint | None = None
) -> AttemptReport:
    committer = committer_for(ctx)
    store = ctx.job.store
    before = store.stats.snapshot()
    try:
        # a refused setup (the attempt id is already in use: an engine reran it) leaves the
        # other run's directory alone: nothing here belongs to this run yet
        committer.setup_task(ctx)
    except InjectedCrash as e:
        raise AttemptDied(f"{ctx.attempt_id}: crashed during setup: {e}") from None
    try:
        out = TaskOutput(committer, ctx)
        result = work(out)
        if failure == "after_write":
            raise AttemptDied(f"{ctx.attempt_id}: injected death after writing its files")
        needs = committer.needs_task_commit(ctx)
    except InjectedCrash as e:
        raise AttemptDied(f"{ctx.attempt_id}: crashed: {e}") from None
    except AttemptDied:
        raise
    except Exception:
        _quiet_abort(committer, ctx)
        raise
    return AttemptReport(
        needs_commit=needs,
        written=tuple(out.written),
        files=len(out.files),
        bytes=out.bytes,
        result=result,
        store_stats=store.stats.diff(before),
        committer_stats=committer.stats.snapshot(),
    )


def commit_attempt(
    ctx: TaskAttemptContext, failure: FailurePoint | None = None, written: tuple[str, ...] = ()
) -> CommitReport:
    store = ctx.job.store
    before = store.stats.snapshot()
    if failure == "during_commit":
        dying = FaultStore(
            store,
            [FaultRule(action="crash", when="after", kinds=frozenset(o for o in Op if o.mutates))],
        )
        ctx = replace(ctx, job=replace(ctx.job, store=dying))
    committer = committer_for(ctx)
    try:
        message = committer.commit_task(ctx, written)
    except InjectedCrash as e:
        raise AttemptDied(f"{ctx.attempt_id}: crashed during task commit: {e}") from None
    if job_ended(ctx.job):  # the job was aborted (or committed) while this attempt ran
        _quiet_abort(committer, ctx)
        committer.sweep_late_attempts(ctx.job)
        raise TaskCommitError(
            f"{ctx.attempt_id}: job {ctx.job.job_id} ended while the attempt ran; its output "
            "is removed"
        )
    return CommitReport(
        message=message,
        store_stats=store.stats.diff(before),
        committer_stats=committer.stats.snapshot(),
    )


def abort_attempt(ctx: TaskAttemptContext) -> dict[str, Any]:
    committer = committer_for(ctx)
    try:
        committer.abort_task(ctx)
    except InjectedCrash as e:
        raise AttemptDied(f"{ctx.attempt_id}: crashed during abort: {e}") from None
    return committer.stats.snapshot()


def _quiet_abort(committer: Committer, ctx: TaskAttemptContext) -> None:
    """A task that failed with an ordinary error cleans up after itself, as Spark's tasks do."""
    try:
        committer.abort_task(ctx)
    except Exception:
        pass
