"""The commit protocol: job and task-attempt contexts, commit messages, the Committer interface.

Contexts are frozen dataclasses that pickle: a task attempt on any worker needs only its
`TaskAttemptContext` to set up, write, commit or abort (`committer_for(ctx)` rebuilds the
committer from it). Engines drive the protocol:

    driver:  setup_job(job)
    task:    setup_task(t); write files; [needs_task_commit(t) and coordinator says yes]
             msg = commit_task(t)   (or abort_task(t))
    driver:  commit_job(job, [msg...])   (or abort_job(job)); cleanup_job(job)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..errors import CommitError, DestinationError, JobCommitError
from ..ids import JobId, TaskAttemptId, TaskId, new_job_id
from ..stats import IOStatistics
from ..store import Store, paths


@dataclass(frozen=True)
class JobContext:
    """One attempt at one job writing into `store` (rooted at the destination)."""

    job_id: JobId
    store: Store
    committer: str
    config: Any
    attempt: int = 0

    @property
    def job_uuid(self) -> str:
        return self.job_id.uuid

    def task(self, index: int, attempt: int = 0) -> TaskAttemptContext:
        return TaskAttemptContext(self, self.job_id.task(index).attempt(attempt))


@dataclass(frozen=True)
class TaskAttemptContext:
    job: JobContext
    attempt_id: TaskAttemptId

    @property
    def task_id(self) -> TaskId:
        return self.attempt_id.task

    @property
    def task_index(self) -> int:
        return self.attempt_id.task.index

    @property
    def attempt_number(self) -> int:
        return self.attempt_id.number


@dataclass(frozen=True)
class TaskCommitMessage:
    """What a committed task attempt tells the driver. Small, picklable, JSON-ready."""

    job_id: str
    task_id: str
    attempt_id: str
    committer: str
    files: tuple[str, ...] = ()
    bytes: int = 0
    iostatistics: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class JobCommitResult:
    """What job commit did: files and bytes committed, stage timings, statistics."""

    job_id: str
    committer: str
    files: int
    bytes: int
    success_path: str | None
    stage_seconds: dict[str, float]
    iostatistics: IOStatistics
    filenames: list[str] = field(default_factory=list)


class Committer(ABC):
    """A committer bound to a destination store and a configuration."""

    name: str = ""

    def __init__(self, store: Store, config: Any) -> None:
        self.store = store
        self.config = config
        self.stats = IOStatistics()

    # --- contexts --------------------------------------------------------------------------

    def new_job(self, job_id: JobId | None = None, attempt: int = 0) -> JobContext:
        return JobContext(
            job_id=job_id or new_job_id(),
            store=self.store,
            committer=self.name,
            config=self.config,
            attempt=attempt,
        )

    # --- task side -------------------------------------------------------------------------

    @abstractmethod
    def setup_job(self, job: JobContext) -> None: ...

    @abstractmethod
    def setup_task(self, task: TaskAttemptContext) -> None: ...

    @abstractmethod
    def task_work_path(self, task: TaskAttemptContext) -> str:
        """Store-relative directory under which the attempt writes its files."""

    def output_path(self, task: TaskAttemptContext, relpath: str) -> str:
        """Where a file written as `relpath` ends up in the destination once committed."""
        return paths.normalize(relpath)

    def announce_files(self, task: TaskAttemptContext, relpaths: Sequence[str]) -> None:
        """The attempt is about to write these files. Committers that must record a file before
        it exists (direct: a marker each) do it for all of them at once; others ignore it."""
        return None

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        """Write one output file of the attempt; `relpath` is relative to the destination."""
        target = paths.join(self.task_work_path(task), paths.normalize(relpath))
        self.store.write_bytes(target, data)
        return target

    def open_file(self, task: TaskAttemptContext, relpath: str) -> BinaryIO:
        """A stream for one output file; the file is published when the stream closes."""
        target = paths.join(self.task_work_path(task), paths.normalize(relpath))
        return self.store.open_write(target)

    @abstractmethod
    def needs_task_commit(self, task: TaskAttemptContext) -> bool: ...

    @abstractmethod
    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        """Commit an attempt. `written` are the paths `write_file`/`open_file` returned for it
        (engines pass them along; committers that find their files themselves ignore them)."""

    @abstractmethod
    def abort_task(self, task: TaskAttemptContext) -> None: ...

    # --- driver side -----------------------------------------------------------------------

    @abstractmethod
    def commit_job(
        self, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> JobCommitResult: ...

    @abstractmethod
    def abort_job(self, job: JobContext) -> None: ...

    @abstractmethod
    def cleanup_job(self, job: JobContext) -> None: ...

    # --- shared checks ---------------------------------------------------------------------

    def check_messages(
        self, job: JobContext, messages: Sequence[TaskCommitMessage], allow_empty: bool = False
    ) -> None:
        """Refuse a job commit with no tasks, foreign messages or one task committed twice."""
        if not messages and not allow_empty:
            raise JobCommitError(
                f"job {job.job_id}: commit_job called with no committed tasks "
                f"(destination {self.store.full_url()})"
            )
        seen: dict[str, str] = {}
        for m in messages:
            if m.job_id != str(job.job_id):
                raise JobCommitError(
                    f"job {job.job_id}: commit message of task attempt {m.attempt_id} "
                    f"belongs to job {m.job_id}"
                )
            if m.task_id in seen:
                raise JobCommitError(
                    f"job {job.job_id}: task {m.task_id} was committed twice, by "
                    f"{seen[m.task_id]} and {m.attempt_id}"
                )
            seen[m.task_id] = m.attempt_id

    def check_destination(self) -> None:
        """The destination must not be a file (raises DestinationError naming it)."""
        from ..errors import NotFound

        try:
            st = self.store.stat("")
        except NotFound:
            return
        if not st.is_dir:
            raise DestinationError(
                f"destination {self.store.full_url()} is a file, not a directory"
            )


def committer_for(ctx: JobContext | TaskAttemptContext) -> Committer:
    """Rebuild the committer a context belongs to (on a worker, from the context alone)."""
    from .factory import build_committer

    job = ctx if isinstance(ctx, JobContext) else ctx.job
    return build_committer(job.committer, job.store, job.config)


__all__ = [
    "CommitError",
    "Committer",
    "JobCommitResult",
    "JobContext",
    "TaskAttemptContext",
    "TaskCommitMessage",
    "committer_for",
]
