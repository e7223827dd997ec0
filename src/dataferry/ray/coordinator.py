"""Task attempts on Ray: the commit coordinator as a Ray actor, and one attempt's run.

The coordinator (Spark's OutputCommitCoordinator, see `commit/coordinator.py`) lives in one Ray
actor per driver and keeps each of the driver's jobs apart. It numbers each task's attempts, so
an attempt Ray retries gets a new number (and a fresh attempt directory), and it keeps each
committed task's commit message: the driver commits the job from those, so a task whose
process died after its commit (its return value lost, Ray runs it again) is neither lost nor
written twice.

Ray runs a task's attempts one after another, never two at once, and starts a new one only
when the last one failed or its process is gone. So when an attempt starts while an earlier
one of its task is still authorised to commit but never reported back, that earlier one died
mid-commit: its right is released and the new attempt may commit.

`run_attempt_on_ray` is what a Ray task runs for one attempt: number it, run the work through
`TaskOutput` (phase 1, `attempt.run_attempt`), ask the coordinator, then commit (phase 2) or
abort. It knows nothing of what the work writes: the Datasink that turns Ray Data blocks into
files is `dataferry.ray`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..commit.coordinator import CommitCoordinator
from ..commit.protocol import JobContext, TaskCommitMessage
from ..engine.attempt import TaskWork, abort_attempt, commit_attempt, run_attempt
from ..stats import IOStatistics

# test-only failure points (see `dataferry.ray._inject_failures`): AttemptFailure's two, and
# two real process deaths (os._exit) around the task commit
FAILURE_POINTS = ("after_write", "during_commit", "exit_after_authorised", "exit_after_commit")


@dataclass
class CommittedTask:
    """A committed task as the coordinator keeps it: its message and its work's result."""

    attempt: int
    message: TaskCommitMessage
    result: Any = None


@dataclass
class JobSummary:
    """What the coordinator knew of a job when the driver ended it."""

    committed: dict[int, CommittedTask]
    attempts: int = 0
    failed_attempts: int = 0
    denied_commits: int = 0
    skipped_attempts: int = 0


class _JobState:
    def __init__(self) -> None:
        self.coordinator = CommitCoordinator()
        self.attempts: dict[int, int] = {}  # task -> attempts numbered so far
        self.open: dict[int, int] = {}  # task -> its attempt that has not reported back
        self.committed: dict[int, CommittedTask] = {}
        self.failed = 0
        self.skipped = 0


class RayCoordinator:
    """The commit coordinators of a driver's jobs, with attempt numbering and the committed
    tasks' messages, run as one Ray actor per driver (as Spark keeps one
    OutputCommitCoordinator per SparkContext): started by the driver's first write, it serves
    every later one without a new process."""

    def __init__(self) -> None:
        self.jobs: dict[str, _JobState] = {}

    def _job(self, job: str) -> _JobState:
        state = self.jobs.get(job)
        if state is None:
            state = self.jobs[job] = _JobState()
        return state

    def next_attempt(self, job: str, task: int) -> int | None:
        """The number of a new attempt of `task`, or None when the task is committed already
        (a rerun of a task whose result Ray lost: there is nothing left to do)."""
        state = self._job(job)
        if task in state.committed:
            state.skipped += 1
            return None
        previous = state.open.pop(task, None)
        if previous is not None:  # it never reported back: its process is gone
            state.failed += 1
            state.coordinator.attempt_failed(task, previous)
        n = state.attempts.get(task, 0)
        state.attempts[task] = n + 1
        state.open[task] = n
        return n

    def can_commit(self, job: str, task: int, attempt: int) -> bool:
        return self._job(job).coordinator.can_commit(task, attempt)

    def attempt_failed(self, job: str, task: int, attempt: int) -> None:
        state = self._job(job)
        if state.open.get(task) == attempt:
            del state.open[task]
        state.failed += 1
        state.coordinator.attempt_failed(task, attempt)

    def attempt_done(self, job: str, task: int, attempt: int) -> None:
        """An attempt ended without committing (nothing to commit, or denied)."""
        state = self._job(job)
        if state.open.get(task) == attempt:
            del state.open[task]

    def task_committed(
        self, job: str, task: int, attempt: int, message: TaskCommitMessage, result: Any
    ) -> None:
        state = self._job(job)
        state.coordinator.task_committed(task, attempt)  # raises unless it was authorised
        state.committed[task] = CommittedTask(attempt, message, result)
        if state.open.get(task) == attempt:
            del state.open[task]

    def finish_job(self, job: str) -> JobSummary:
        """Forget a job: its committed tasks and counts."""
        state = self.jobs.pop(job, None) or _JobState()
        return JobSummary(
            committed=state.committed,
            attempts=sum(state.attempts.values()),
            failed_attempts=state.failed,
            denied_commits=state.coordinator.denials,
            skipped_attempts=state.skipped,
        )


@dataclass(frozen=True)
class CoordinatorHandle:
    """A job's view of the driver's coordinator actor (pickled into each write task)."""

    actor: Any
    job: str

    def call(self, method: str, *args: Any) -> Any:
        import ray

        return ray.get(getattr(self.actor, method).remote(self.job, *args))


# The driver keeps its coordinator's handle for as long as it runs: an actor that no handle
# names is destroyed, and a write that came just after another could otherwise be given, by
# name, the actor of the write before while it was being torn down (ActorDiedError). The key
# holds the Ray session as well as the job: after `ray.shutdown()` and `ray.init()` in one
# process the new cluster numbers its jobs from 01000000 again, and the old cluster's handle
# must not be used on it.
_coordinators: dict[tuple[str, str], Any] = {}


def coordinator_actor() -> Any:
    """The driver's coordinator actor, started on first use (its process takes about a
    second to come up; later writes reuse it). It takes no CPU: it only answers small calls,
    one at a time."""
    import ray

    context = ray.get_runtime_context()
    name = f"dataferry-commit-coordinator-{context.get_job_id()}"
    key = (context.get_session_name(), name)
    actor = _coordinators.get(key)
    if actor is None:
        _coordinators.clear()  # handles of an earlier session name actors that are gone
        actor = _coordinators[key] = (
            ray.remote(RayCoordinator)
            .options(name=name, get_if_exists=True, num_cpus=0, max_concurrency=1)
            .remote()
        )
    return actor


def finish_job(handle: CoordinatorHandle) -> JobSummary:
    """Forget the job in the coordinator; what it knew of it."""
    return handle.call("finish_job")


@dataclass
class RayAttemptReport:
    """What one Ray task returns to the driver: the attempt's statistics (its commit message
    and result go to the coordinator, which keeps them even if this return is lost)."""

    task: int
    attempt: int | None
    committed: bool = False
    store_stats: dict[str, Any] = field(default_factory=dict)
    committer_stats: dict[str, Any] = field(default_factory=dict)


def run_attempt_on_ray(
    job: JobContext,
    task: int,
    coordinator: CoordinatorHandle,
    work: TaskWork,
    failures: dict[tuple[int, int], str] | None = None,
) -> RayAttemptReport:
    """Run one attempt of `task` in this Ray task and commit it if the coordinator agrees.

    Raises what the attempt raised (the coordinator is told first, so a retry may commit);
    `failures` injects failures by (task, attempt), for tests (see FAILURE_POINTS).
    """
    n = coordinator.call("next_attempt", task)
    if n is None:
        return RayAttemptReport(task, None)
    ctx = job.task(task, n)
    failure = (failures or {}).get((task, n))
    try:
        report = run_attempt(ctx, work, "after_write" if failure == "after_write" else None)
    except BaseException:
        coordinator.call("attempt_failed", task, n)
        raise
    if not report.needs_commit:
        coordinator.call("attempt_done", task, n)
        return RayAttemptReport(task, n, False, report.store_stats, report.committer_stats)
    if not coordinator.call("can_commit", task, n):
        aborted = abort_attempt(ctx)
        coordinator.call("attempt_done", task, n)
        return RayAttemptReport(
            task, n, False, report.store_stats, _merged(report.committer_stats, aborted)
        )
    if failure == "exit_after_authorised":
        os._exit(1)  # a process death: no abort, no word to the coordinator
    try:
        committed = commit_attempt(
            ctx, "during_commit" if failure == "during_commit" else None, report.written
        )
    except BaseException:
        coordinator.call("attempt_failed", task, n)
        raise
    coordinator.call("task_committed", task, n, committed.message, report.result)
    if failure == "exit_after_commit":
        os._exit(1)
    return RayAttemptReport(
        task,
        n,
        True,
        _merged(report.store_stats, committed.store_stats),
        _merged(report.committer_stats, committed.committer_stats),
    )


def _merged(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    s = IOStatistics(a)
    s.merge(b)
    return s.snapshot()
