"""The base of the table committers: direct's in-place, marked writes, and a job commit that
ends in one transaction of the table's own log instead of a commit record.

    task:    write each file in place (table layout, attempt-unique name) after its marker;
             task commit reads each file's footer (`footers.py`) into its commit message
    driver:  plan: reconcile against the markers (direct's), the table's plan (format)
             intent -> delete_stray_files -> commit_table (the format's transaction,
             idempotent: a transaction already in the log under this job is not made again)
             -> cleanup (markers, and any file an attempt wrote since)

The format is an object the committer holds (`self.format`, a `TableFormat` of format.py):
everything that knows a table's log is there, everything about markers, claims and the
intent is here. A format's committer class only binds the two (`format_class`).

Readers of the table see nothing until the transaction: a data file no snapshot references is
invisible to the format's readers, and it is deleted by the job (strays), by the abort (every
marked file) or by `dataferry cleanup` and the next job (a dead job's marked files). The write
modes are the table's: `overwrite` replaces in the same transaction (earlier snapshots keep
their files), `error` refuses a table that exists.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgspec
import pyarrow as pa

from ...errors import CommitError, CommitUndone, ConfigError, DestinationError
from ...markers.ownership import owned_by_marker_dir
from ...stages import stage
from ...store import Store, paths
from ..direct.committer import DirectCommitter, DirectConfig, unique_name
from ..direct.deletion import delete_stray_files
from ..job.stages import check_destination
from ..protocol import (
    Applied,
    CommitPlan,
    JobContext,
    StageContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from ..records.intent import Intent, intent_path
from .footers import (
    FileFacts,
    facts_of,
    file_facts,
    read_footer,
    schema_from_text,
    schema_to_text,
)
from .format import TableFormat
from .plan import TablePlan

log = logging.getLogger("dataferry.commit")

CLAIM_ROOT = "_dataferry"


@dataclass(frozen=True)
class TableConfig(DirectConfig):
    """The options every table committer has (and the direct committer's markers options).

    commit_retries: how often the table transaction is tried again after a conflict with
        another writer's commit (Delta's `max_commit_retries`, Iceberg's
        `commit.retry.num-retries`), with jittered exponential backoff between tries.
    """

    mark_successful_jobs: bool = False  # a table's log says what committed, not `_SUCCESS`
    commit_retries: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.commit_retries, int) or self.commit_retries < 0:
            raise ConfigError(f"commit_retries must be an int >= 0, got {self.commit_retries!r}")


class TableCommitter(DirectCommitter):
    """A committer whose job commit is one transaction of a table format, the `TableFormat`
    it holds (`self.format`, made from the class's `format_class`)."""

    format_class: type[TableFormat] = TableFormat
    plan_type: type[TablePlan] = TablePlan  # the format's (`TableFormat.plan_type`)
    permanent_entries = ()  # nothing of the commit stays but the table's own log
    replaces_in_transaction = True  # `overwrite` is the transaction's, not a delete of files
    keeps_partition_columns = False  # data files hold their partition columns (Iceberg, Hudi)
    data_root = ""  # where data files lie in the table ("data" for Iceberg)
    format_name = ""  # "Delta Lake", ...

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A format's committer class takes its format's layout facts (the class-level
        hooks of cleanup and recovery read them from the class)."""
        super().__init_subclass__(**kwargs)
        fmt = cls.__dict__.get("format_class")
        if fmt is None:
            return
        cls.name, cls.format_name = fmt.name, fmt.label
        cls.markers_root, cls.permanent_entries = fmt.markers_root, fmt.permanent_entries
        cls.data_root, cls.keeps_partition_columns = fmt.data_root, fmt.keeps_partition_columns
        cls.keeps_empty_partition_values = fmt.keeps_empty_partition_values
        cls.plan_type = fmt.plan_type
        cls.batch_markers = fmt.batch_markers

    def __init__(self, store: Store, config: Any) -> None:
        super().__init__(store, config)
        self.input_schema: pa.Schema | None = None
        self.partition_by: tuple[str, ...] = ()
        self.format = self.format_class(self)

    # --- the driver, before any task runs ---------------------------------------------------

    def prepare_input(self, schema: Any, partition_by: Sequence[str]) -> None:
        """Told the data's schema and partition columns before any task runs (by
        `write_dataset` and the engines' faces): the table is checked against them now, so a
        write the table would refuse fails before any file is written."""
        self.input_schema = schema
        self.partition_by = tuple(partition_by)
        self.check_input(schema, self.partition_by)

    def check_input(self, schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
        """Refuse (ConfigError naming the column) data the table cannot take."""
        self.format.check_input(schema, partition_by)

    def new_job(self, job_id: Any = None, attempt: int = 0) -> JobContext:
        return self.format.prepare_job(super().new_job(job_id, attempt))

    def holds_claim(self, job: JobContext) -> bool:
        """No claim for an append when the format commits it through the table's optimistic
        concurrency (`TableFormat.commits_without_claim`) and the job has a driver record:
        the record is its fence and what vouches for its intent record after a crash
        (`job/vouch.py`); a job driven through the hooks alone keeps the claim, as
        overwrites and schema-merging appends do."""
        claimless = self.format.commits_without_claim(job)
        return job.claim and not (claimless and job.driver_recorded)

    def claimless_jobs(self) -> bool:
        """Whether this committer's jobs, as its options make them, commit without the
        destination's claim; asked of a job context made for the question alone (the
        format's preparation of a job, Hudi's reserved instant, is not made)."""
        return self.format.commits_without_claim(super().new_job())

    def setup_job(self, job: JobContext) -> None:
        self.format.before_setup(job)
        check_destination(self.store)
        if job.mode == "error" and self.table_exists():
            raise DestinationError(
                f"{self.format_name} table {self.store.full_url()} already exists; write with "
                "mode='append' or mode='overwrite'"
            )
        self.clean_dead_jobs()
        self.format.after_setup(job)

    def file_columns(self, task: TaskAttemptContext, relpath: str, schema: pa.Schema) -> Any:
        return self.format.file_columns(task, relpath, schema)

    def partition_keys(self, schema: Any, partition_by: Sequence[str]) -> Any:
        return self.format.partition_keys(schema, partition_by)

    def clean_dead_jobs(self) -> None:
        """What the next job does for a dead one: roll back (or finish) the jobs of this table
        whose drivers are known dead, deleting their marked files (as `dataferry cleanup`;
        the whole cleanup only when the claim or a dead driver asks for it now: `sweep`)."""
        if not self.store.exists(self.markers_root):
            return
        from ..job.sweep import sweep

        report = sweep(self.store, self.markers_root)
        if report is None:
            return
        for path in (*report.rolled_back, *report.rolled_forward):
            log.warning("table %s: recovered dead job %s", self.store.full_url(), path)

    def output_path(self, task: TaskAttemptContext, relpath: str) -> str:
        name = unique_name(relpath, task)
        return f"{self.data_root}/{name}" if self.data_root else name

    # --- task commit: the files' footers travel with the message ----------------------------

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        message = super().commit_task(task, written)
        with self.stats.duration("task_stage_read_footers"):
            facts = [self._reported_facts(task, f) for f in message.files]
        return replace(message, extra={**message.extra, "files": facts})

    def _reported_facts(self, task: TaskAttemptContext, path: str) -> dict[str, Any]:
        """A file's facts from its footer, with what the format adds (`file_report`)."""
        size, meta = read_footer(self.store, path)
        report = self.format.file_report(task, path, size, meta)
        return {**facts_of(path, size, meta).to_json(), **(report or {})}

    # --- job commit --------------------------------------------------------------------------

    def committed_files(self, job: JobContext) -> list[str]:
        """The job's files some version of the table references (its transaction landed):
        what a rollback of its leftovers (a zombie's markers after the commit) must keep."""
        tag = f"-{job.job_uuid[:8]}-t"
        return sorted(f for f in self.referenced_files() if tag in paths.name(f))

    def referenced_anywhere(self) -> set[str]:
        return self.referenced_files()

    def existing_data(self, job: JobContext, plan: CommitPlan) -> list[str]:
        """What `error` refuses: the table's live files (none if there is no table)."""
        return self.table_files() if self.table_exists() else []

    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        plan = super().plan_commit(ctx, job, messages)
        reported = {f["path"]: f for m in messages for f in m.extra.get("files", ())}
        self.format.take_reports(job, reported)
        facts = [
            FileFacts.from_json(reported[f]) if f in reported else file_facts(ctx.store, f)
            for f in plan.payload.files
        ]
        schema = self.input_schema or self.schema_of_files(ctx, facts)
        plan.payload = self.plan_type(
            **msgspec.structs.asdict(plan.payload),
            facts=facts,
            schema=schema_to_text(schema) if schema is not None else "",
            partition_by=list(self.partition_by or self.partitions_of(facts)),
            table=plan_table_stage(ctx, self, job, facts),
        )
        plan.bytes = sum(f.size for f in facts)
        return plan

    def schema_of_files(self, ctx: StageContext, facts: Sequence[FileFacts]) -> pa.Schema | None:
        """The table's schema when no input schema was given: the first file's, with the
        partition columns (as strings) its path names."""
        if not facts:
            return None
        schema = read_footer(ctx.store, facts[0].path)[1].schema.to_arrow_schema()
        for column in self.partitions_of(facts):
            if column not in schema.names:
                schema = schema.append(pa.field(column, pa.string()))
        return schema

    def partitions_of(self, facts: Sequence[FileFacts]) -> tuple[str, ...]:
        from .layout import partition_values

        start = 1 if self.data_root else 0
        return tuple(partition_values(facts[0].path, start)) if facts else ()

    def check_intent(self, ctx: StageContext, job: JobContext, intent: Intent) -> None:
        """A resumed commit (recovery, a retry) whose transaction is not in the table and
        whose files are not all there any more is undone, not finished: a job that took the
        destination over rolled this one back (deleting its files) just before its intent
        was written, and a table's log, unlike a rename, would take paths that name nothing.

        Any record, resumed or not, is first checked to be one this committer writes: a
        table's overwrite is its transaction, so a record listing entries to delete, or files
        its job's tag does not name (another job's, committed), is damaged or forged, and
        finishing it would delete committed data or commit those files twice."""
        foreign = [f for f in intent.payload.files if not owned_by_marker_dir(self.job_dir(job), f)]
        if intent.replace or foreign:
            raise CommitError(
                f"job {job.job_id}: its intent record in {ctx.store.full_url(self.job_dir(job))} "
                + (
                    f"lists {len(intent.replace)} entries to delete, which a table's commit "
                    "never does"
                    if intent.replace
                    else f"names files its job did not write (e.g. {foreign[0]})"
                )
                + ": damaged or forged, not finished; nothing was deleted or committed"
            )
        if not ctx.resumed:
            return  # the files were reconciled against the markers a moment ago
        files = intent.payload.files
        there = ctx.pool.map(ctx.store.exists, files)
        gone = [f for f, found in zip(files, there, strict=True) if not found]
        if not gone or self.commits_of_job(job.job_uuid) > 0:
            return
        ctx.store.delete(intent_path(self.job_dir(job)))
        raise CommitUndone(
            f"job {job.job_id}: {len(gone)} of its {len(files)} files are gone (e.g. "
            f"{ctx.store.full_url(gone[0])}) and its transaction is not in the table: "
            "it was rolled back by the job that took the destination over; undone"
        )

    def landed_in_destination(self, job: JobContext) -> bool:
        """The table says whether the job's transaction is in it (its job id in a snapshot's
        summary, a Delta txn, a Hudi instant): a table job whose intent record is damaged is
        settled by it, never left blocking the table. Either way `rollback_job` is the rest:
        it keeps the files a version of the table references and removes the others."""
        return self.commits_of_job(job.job_uuid) > 0

    def rollback_job(self, job: JobContext) -> None:
        self.format.forget(job.job_uuid)  # its commit request (group commit), if any
        super().rollback_job(job)

    def commits_of_job(self, job_uuid: str) -> int:
        """How many versions of the table the job's transaction made (0: not committed)."""
        return self.format.landed(job_uuid)

    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        plan: TablePlan = intent.payload
        delete_stray_files(ctx, self, job, plan.stray)
        details = commit_table_stage(ctx, self, job, intent)
        facts = plan.facts
        return Applied(
            files=len(facts),
            bytes=sum(f.size for f in facts),
            filenames=[f.path for f in facts[:100]],
            details={
                "stray_files_deleted": len(plan.stray),
                "markers_found": plan.marked,
                **details,
            },
        )

    @staticmethod
    def plan_schema(intent: Intent) -> pa.Schema | None:
        text = intent.payload.schema
        return schema_from_text(text) if text else None

    @classmethod
    def tidy(cls, store: Store) -> None:
        store.delete_if_empty(cls.markers_root)
        store.delete_if_empty(CLAIM_ROOT)

    # --- the format's answers (the referee's checks, `dataferry verify crash`) ---------------

    def table_exists(self) -> bool:
        return self.format.exists()

    def table(self, *args: Any, **kwargs: Any) -> Any:
        """The format library's own handle on the table (a deltalake `DeltaTable`, a pyiceberg
        `Table`; None if there is none), for callers that speak the format."""
        return self.format.table(*args, **kwargs)

    def table_files(self) -> list[str]:
        """The live data files of the table's current version (paths in the store)."""
        return self.format.live_files()

    def read_rows(self) -> pa.Table | None:
        """The current version's rows by the format's own reader (None: no table)."""
        return self.format.read_rows()

    def referenced_files(self) -> set[str]:
        """The data files some version of the table still references (`TableFormat`)."""
        return self.format.referenced_files()

    def plan_table(self, ctx: StageContext, job: JobContext, facts: Sequence[FileFacts]) -> Any:
        return self.format.plan(ctx, job, facts)

    def commit_table(self, ctx: StageContext, job: JobContext, intent: Intent) -> dict[str, Any]:
        return self.format.commit(ctx, job, intent)


@stage("job_stage_plan_table", "plan_table")
def plan_table_stage(
    ctx: StageContext, committer: TableCommitter, job: JobContext, facts: Sequence[FileFacts]
) -> Any:
    return committer.plan_table(ctx, job, facts)


@stage("job_stage_commit_table", "commit_table")
def commit_table_stage(
    ctx: StageContext, committer: TableCommitter, job: JobContext, intent: Intent
) -> dict[str, Any]:
    """The switch readers see: one transaction of the table's log."""
    ctx.fence(f"committing the {committer.format_name} transaction")
    try:
        return committer.commit_table(ctx, job, intent)
    except CommitUndone:
        # the table did not change and will not take this transaction (a conflict, or a
        # transaction the table refuses: TableCommitRefused): the job is undecided again, so
        # its abort (or recovery) rolls it back, deleting its files, rather than retry forever
        ctx.store.delete(intent_path(committer.job_dir(job)))
        raise
