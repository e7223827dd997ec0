"""The commit protocol: job and task-attempt contexts, commit messages, the Committer interface.

Contexts are frozen dataclasses that pickle: a task attempt on any worker needs only its
`TaskAttemptContext` to set up, write, commit or abort (`committer_for(ctx)` rebuilds the
committer from it). Engines drive the protocol:

    driver:  setup_job(job)
    task:    setup_task(t); write files; [needs_task_commit(t) and coordinator says yes]
             msg = commit_task(t)   (or abort_task(t))
    driver:  commit_job(job, [msg...])   (or abort_job(job)); cleanup_job(job)

Every committer's job commit is the one in `jobcommit.py` (claim, plan, intent, finish); a
committer supplies its planning and applying stages and its recovery hooks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..errors import CommitError, DestinationError, InjectedCrash, JobCommitError
from ..ids import JobId, TaskAttemptId, TaskId, new_job_id, parse_job_id
from ..stats import IOStatistics
from ..store import IOPool, Store, paths
from . import jobcommit
from .claim import DEFAULT_CLAIM_TIMEOUT_S
from .drivers import driver_crashed, end_driver
from .intent import Intent
from .jobcommit import Applied, CommitPlan
from .registry import KNOWN
from .stages import StageContext
from .success import SuccessData

MODES = ("error", "append", "overwrite")


@dataclass(frozen=True)
class JobContext:
    """One attempt at one job writing into `store` (rooted at the destination)."""

    job_id: JobId
    store: Store
    committer: str
    config: Any
    attempt: int = 0
    mode: str = "append"  # what the commit does with data already there (see MODES)
    claim: bool = True  # hold the destination's claim while committing (not for staging)

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
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Leftover:
    """What a job that is no longer running may have left: its directory, and whose it is."""

    path: str
    committer: str
    job_uuid: str = ""
    attempt: int = 0


class Committer(ABC):
    """A committer bound to a destination store and a configuration."""

    name: str = ""
    can_undo_decided = False  # cleanup --rollback can undo a commit that has an intent record
    starts_uploads = False  # its tasks leave multipart uploads pending (cleanup aborts orphans)
    write_mode = "append"  # set by make_committer(mode=...)
    claim_timeout_s = DEFAULT_CLAIM_TIMEOUT_S

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
            mode=self.write_mode,
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

    def commit_job(self, job: JobContext, messages: Sequence[TaskCommitMessage]) -> JobCommitResult:
        """Commit the job: all of its committed tasks' output becomes visible, or none does."""
        return jobcommit.commit_job(self, job, messages)

    def abort_job(self, job: JobContext) -> None:
        """Undo a job that has not decided its commit; finish one that has (once its intent
        record is saved, finishing is the only way to leave the destination whole)."""
        try:
            with self.stats.duration("job_stage_abort"):
                jobcommit.recover_job(self, job)
        except InjectedCrash:
            driver_crashed(self.store, job.job_uuid)  # the driver died: its record stays
            raise
        except Exception:
            end_driver(self.store, job.job_uuid)  # given up: what is left is cleanup's
            raise
        end_driver(self.store, job.job_uuid)

    @abstractmethod
    def cleanup_job(self, job: JobContext) -> None: ...

    # --- the job commit's hooks (see jobcommit.py) ---------------------------------------------

    @classmethod
    def prepare_mode(cls, mode: str) -> tuple[str, dict[str, Any]]:
        """A user's write mode -> (the job's mode for the commit, committer options it implies).
        Committers with modes of their own (Hive's partition overwrite) translate them here."""
        if mode not in MODES:
            from ..errors import ConfigError

            raise ConfigError(f"unknown write mode {mode!r}; use one of {', '.join(MODES)}")
        return mode, {}

    def stage_context(self, job: JobContext, threads: int | None = None) -> StageContext:
        """What the job's stages share; `threads` for its I/O pool (default: the config's)."""
        if threads is None:
            threads = getattr(self.config, "io_threads", 0) or getattr(self.config, "threads", 8)
        return StageContext(
            store=self.store,
            stats=self.stats,
            pool=IOPool(threads),
            job_id=str(job.job_id),
            config=self.config,
            layout=self.layout_of(job),
        )

    def layout_of(self, job: JobContext) -> Any:
        """Where the committer keeps the job's things, if it has a layout object."""
        return None

    @abstractmethod
    def job_dir(self, job: JobContext) -> str:
        """The job's own directory (its intent record lives there)."""

    @abstractmethod
    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        """Decide everything the commit will do, changing nothing a reader sees."""

    @abstractmethod
    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        """Make the planned output visible, from the intent record alone; idempotent, so a
        resumed commit runs it again from the start."""

    def check_intent(self, ctx: StageContext, job: JobContext, intent: Intent) -> None:
        """Check the committer's plan in a decided intent record before anything visible
        changes (the replace runs first); ValidationError naming the record and field if it is
        damaged. Committers whose plan lives in other files check those here too."""
        return None

    def existing_data(self, job: JobContext, plan: CommitPlan) -> list[str]:
        """What of the destination a write mode sees as data (and `overwrite` replaces)."""
        return jobcommit.visible_entries(self)

    def success_bytes(
        self, ctx: StageContext, job: JobContext, intent: Intent, applied: Applied
    ) -> bytes | None:
        """The `_SUCCESS` to write (None: none): a JSON record in Hadoop's SuccessData shape."""
        if not getattr(self.config, "mark_successful_jobs", True):
            return None
        data = SuccessData.for_job(
            self.success_committer_name(),
            job,
            f"Job {job.job_id} committed by dataferry's {self.name} committer",
            metrics={k: v for k, v in ctx.stats.counters.items() if k.startswith("committer_")},
            diagnostics={"mode": intent.mode, "stage": ctx.last_stage},
            filenames=[self.store.full_url(f) for f in applied.filenames[:100]],
            iostatistics=ctx.stats.snapshot(),
        )
        return data.to_bytes()

    def success_committer_name(self) -> str:
        return f"dataferry.commit.{self.name}"

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        """The job commit's last stage: delete the job's own directory."""
        self.store.delete(self.job_dir(job), recursive=True)
        return "deleted"

    def rollback_job(self, job: JobContext) -> None:
        """Undo a job whose commit was never decided: nothing of it may stay visible."""
        self.store.delete(self.job_dir(job), recursive=True)

    def commit_failed(self, ctx: StageContext, job: JobContext, error: BaseException) -> None:
        """Told when a job commit fails (for reports); must not raise."""
        return None

    # --- what dead jobs leave behind (dataferry cleanup) ----------------------------------------

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        """Directories of this committer's jobs in the destination, live or dead."""
        return []

    @classmethod
    def tidy(cls, store: Store) -> None:
        """Remove this committer's shared parent directories once no job uses them (a job
        that died between deleting its own directory and its parent's leaves them empty)."""
        return None

    @classmethod
    def recover_leftover(cls, store: Store, leftover: Leftover, rollback: bool = False) -> str:
        """Finish or undo the job that left `leftover`, then remove it; returns what was done."""
        committer = committer_by_name(leftover.committer, store)
        job = committer.new_job(new_job_id(job_uuid=leftover.job_uuid), attempt=leftover.attempt)
        outcome = jobcommit.recover_job(committer, job, rollback=rollback)
        store.delete(leftover.path, recursive=True)
        return outcome

    # --- shared checks ---------------------------------------------------------------------

    def check_messages(self, job: JobContext, messages: Sequence[TaskCommitMessage]) -> None:
        """Refuse foreign messages and a task committed twice. No messages at all is a job
        whose tasks wrote nothing (Spark's zero-partition job): it commits, publishing
        nothing but `_SUCCESS`, as Hadoop's committers do."""
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
    job = ctx if isinstance(ctx, JobContext) else ctx.job
    committer = KNOWN[job.committer].committer_class()(job.store, job.config)
    committer.write_mode = job.mode
    return committer


def committer_by_name(name: str, store: Store) -> Committer:
    """A committer with its default options (recovery works from the store, not the options);
    a name no committer has (a damaged record's) raises ValidationError naming it."""
    spec = KNOWN.get(name) if isinstance(name, str) else None
    if spec is None:
        from ..errors import ValidationError

        raise ValidationError(
            f"names committer {name!r:.60}, which dataferry does not have "
            f"(known: {', '.join(sorted(KNOWN))})",
            store.full_url(),
            "committer",
        )
    return spec.committer_class()(store, spec.config_class()(**spec.defaults))


def job_from_ids(committer: Committer, job_id: str, job_uuid: str, attempt: int) -> JobContext:
    return committer.new_job(parse_job_id(job_id, job_uuid), attempt=attempt)


__all__ = [
    "CommitError",
    "Committer",
    "JobCommitResult",
    "JobContext",
    "Leftover",
    "TaskAttemptContext",
    "TaskCommitMessage",
    "committer_for",
]
