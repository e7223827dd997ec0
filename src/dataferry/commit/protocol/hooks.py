"""The hook interface every committer implements, and the job machinery calls.

    driver:  setup_job(job)
    task:    setup_task(t); write files; [needs_task_commit(t) and coordinator says yes]
             msg = commit_task(t)   (or abort_task(t))
    driver:  commit_job(job, [msg...])   (or abort_job(job)); cleanup_job(job)

Every committer's job commit is the one in `job/commit.py` (claim, plan, intent, finish); a
committer supplies its planning and applying stages and its recovery hooks here. Nothing in
this module runs the machinery: `base.Committer` is the thin base that does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from ...errors import ConfigError
from ...ids import JobId, new_job_id
from ...stats import IOStatistics
from ...store import IOPool, Store, paths
from ..records.claim import DEFAULT_CLAIM_TIMEOUT_S
from ..records.intent import Intent
from ..records.success import SuccessData
from .contexts import MODES, JobContext, TaskAttemptContext
from .inflight import flat_inflight_name, inflight_name
from .messages import Leftover, TaskCommitMessage
from .plans import Applied, CommitPlan, Plan
from .stage import StageContext


@dataclass(frozen=True)
class FileColumns:
    """Columns a committer's data files hold besides the data's (Hudi's meta columns), or the
    data's as the format stores them (Delta's types): `schema`, the Arrow schema to open the
    file with, and `prepend(rows, first_row)`, the rows of the file from row `first_row` on
    as the file holds them (those columns added, the values converted)."""

    schema: Any
    prepend: Callable[[Any, int], Any]


@dataclass(frozen=True)
class PartitionKeys:
    """How a committer's partitioning splits the data when it is not by the raw values of the
    `partition_by` columns (Iceberg's transforms: `day(ts)`, `bucket[16](id)`): the data is
    split by `partition_by` (the data's own columns and key columns derived from them), whose
    values `add(rows)` appends to rows (a Table or RecordBatch) as columns; `schema` is the
    data's schema with them. The committer's `file_columns` leaves derived keys out of files."""

    partition_by: tuple[str, ...]
    schema: Any
    add: Callable[[Any], Any]


class CommitterHooks(ABC):
    """What a committer is: its task side, its job commit's hooks (planning and applying
    stages, recovery, write modes) and what its dead jobs leave. The job machinery (`job/`)
    drives these; `base.Committer` adds the job-level calls on top."""

    name: str = ""
    can_undo_decided = False  # cleanup --rollback can undo a commit that has an intent record
    starts_uploads = False  # its tasks leave multipart uploads pending (cleanup aborts orphans)
    write_mode = "append"  # set by make_committer(mode=...)
    # a user's mode name -> what it replaces, in the common modes' words, where a committer's
    # own vocabulary differs (Hive's `overwrite` replaces the partitions written)
    mode_meanings: dict[str, str] = {}
    claim_timeout_s = DEFAULT_CLAIM_TIMEOUT_S
    # the frozen struct its `plan_commit` returns as `CommitPlan.payload`: what its intent
    # records are decoded as (`plans.plan_type_of`); None: a dict, unchecked (every dataferry
    # committer declares one)
    plan_type: type[Plan] | None = None

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

    # committers that publish an attempt's files by renaming them name them in flight
    # (`protocol/inflight.py`), so no reader's data glob counts them before the job commit
    inflight_names = False
    # True where the attempt's files are named in flight flat (`protocol/inflight.py`), all in
    # the attempt's own directory: committers whose task commit scans that directory
    flat_attempts = False
    # True where the job's directory holds only its attempts' private work (files named in
    # flight, manifests), so an abort may delete what late attempts put there; not where it
    # holds the records that find files written in place or uploads (direct's markers,
    # magic's pending uploads): cleanup needs those
    sweeps_late_attempts = False
    # False when a committer above this one publishes the files (hive's load): this one's
    # job commit then leaves them their in-flight names, for that one to take off
    publishes_own_names = True
    # True where `overwrite` is part of the commit's own transaction (a table format's log),
    # so the job commit deletes nothing of what is there
    replaces_in_transaction = False
    # True where the data files must hold their partition columns too (Iceberg, Hudi), not
    # only the `col=value` directories
    keeps_partition_columns = False
    # True where an empty string partition value is kept apart from null, in a `col=`
    # directory of its own (Delta, as deltalake), not in Hive's null directory
    keeps_empty_partition_values = False

    def prepare_input(self, schema: Any, partition_by: Sequence[str]) -> None:
        """Told the data's Arrow schema and partition columns on the driver before any task
        runs, so a committer that can check them (a table's) refuses bad input early."""
        return None

    def partition_keys(self, schema: Any, partition_by: Sequence[str]) -> PartitionKeys | None:
        """How the data (Arrow schema `schema`, after `prepare_input`) is split into files,
        when not by the raw values of `partition_by`; None (the default): by those."""
        return None

    def file_columns(
        self, task: TaskAttemptContext, relpath: str, schema: Any
    ) -> FileColumns | None:
        """Columns the data file `relpath` (of Arrow schema `schema`) must hold besides the
        data's, or its columns converted to the format's types, asked once per file before it
        is opened; None (the default): the rows as they are."""
        return None

    def attempt_path(self, task: TaskAttemptContext, relpath: str) -> str:
        """Where the attempt writes a file that is `relpath` in the destination."""
        name = paths.normalize(relpath)
        if self.inflight_names:
            flat = flat_inflight_name(name) if self.flat_attempts else None
            name = flat or inflight_name(name)
        return paths.join(self.task_work_path(task), name)

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        """Write one output file of the attempt; `relpath` is relative to the destination."""
        target = self.attempt_path(task, relpath)
        self.store.write_bytes(target, data)
        return target

    def open_file(self, task: TaskAttemptContext, relpath: str) -> BinaryIO:
        """A stream for one output file; the file is published when the stream closes."""
        return self.store.open_write(self.attempt_path(task, relpath))

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
    def cleanup_job(self, job: JobContext) -> None: ...

    # --- the job commit's hooks (see job/commit.py) ---------------------------------------------

    @classmethod
    def prepare_mode(cls, mode: str) -> tuple[str, dict[str, Any]]:
        """A user's write mode -> (the job's mode for the commit, committer options it implies).
        Committers with modes of their own (Hive's partition overwrite) translate them here."""
        if mode not in MODES:
            raise ConfigError(f"unknown write mode {mode!r}; use one of {', '.join(MODES)}")
        return mode, {}

    def holds_claim(self, job: JobContext) -> bool:
        """Whether the job's commit holds the destination's claim (one commit at a time). Every
        committer's does, but an append into a table whose format commits it through the
        table's own optimistic concurrency (`TableCommitter`): appenders go side by side."""
        return job.claim

    def stage_context(self, job: JobContext, threads: int | None = None) -> StageContext:
        """What the job's stages share; `threads` for its I/O pool (default: the config's)."""
        if threads is None:
            threads = getattr(self.config, "io_threads", 0) or getattr(self.config, "threads", 8)
        return StageContext(
            store=self.store,
            stats=self.stats,
            # a server's round trips: parallel from the first call, no inline sample
            pool=IOPool(threads, sample=not self.store.capabilities.remote_calls),
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

    def prepare_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan | None:
        """The part of planning that reads only the job's own files, run before the claim is
        held (beside it, where the I/O pool has threads); its guess at the plan, or None.
        Only on stores whose closes are slow (`slow_close`): the intent of the guessed plan is
        then written ahead, and renamed into place if `plan_commit` agrees with it."""
        return None

    @abstractmethod
    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        """Decide everything the commit will do, changing nothing a reader sees."""

    @abstractmethod
    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        """Make the planned output visible, from the intent record alone; idempotent, so a
        resumed commit runs it again from the start."""

    @abstractmethod
    def existing_data(self, job: JobContext, plan: CommitPlan) -> list[str]:
        """What of the destination a write mode sees as data (and `overwrite` replaces)."""

    def check_intent(self, ctx: StageContext, job: JobContext, intent: Intent) -> None:
        """Check what a decided intent record's plan relies on beyond the record, before
        anything visible changes (the replace runs first); ValidationError naming the file and
        field if it is damaged. The plan's own fields were checked as the record was read (its
        `plan_type`); committers whose plan lives partly in other files (the manifest
        committer's entries) check those here."""
        return None

    def success_bytes(
        self, ctx: StageContext, job: JobContext, intent: Intent, applied: Applied
    ) -> bytes | None:
        """The `_SUCCESS` to write (None: none): zero bytes, or with the `success_data` option
        a JSON record in Hadoop's SuccessData shape."""
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
        return self.success_record(data)

    def success_record(self, data: SuccessData) -> bytes:
        """`_SUCCESS`'s bytes: Hadoop's JSON only when asked for (`success_data`), since a
        non-empty `_SUCCESS` makes polars refuse the whole directory; else the classic
        zero-byte marker that Hadoop, Spark and every PyData reader accept."""
        return data.to_bytes() if getattr(self.config, "success_data", False) else b""

    def success_committer_name(self) -> str:
        return f"dataferry.commit.{self.name}"

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        """The job commit's last stage: delete the job's own directory."""
        self.store.delete(self.job_dir(job), recursive=True)
        return "deleted"

    def landed_in_destination(self, job: JobContext) -> bool | None:
        """Whether the job's commit is in the destination, as the destination itself says
        (a table's log holds its transaction, or not); None (the default): it cannot say.
        Asked when the job's intent record is damaged: a committer that answers settles the
        job by its `rollback_job`, which must keep what the destination holds of the job."""
        return None

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
