"""What the one `TableCommitter` asks of a table format: the `TableFormat` interface.

A format is one object the committer holds (composition, not a subclass of the committer):
it knows the table's log, and nothing of markers, claims or intents, which are the
committer's. The committer serves it the store, the options and the data's schema
(`self.committer`); the format answers:

    exists()             is there a table (a committed version) at the destination
    live_files()         the data files of the current version
    referenced_files()   the data files some version still references (anything else is an
                         orphan: the referee's and recovery's check)
    read_rows()          the current version's rows, by the format's own reader
    landed(job_uuid)     how many versions the job's transaction made (0: not in the table;
                         1: committed; more: applied twice)
    is_conflict(error)   whether the format's library raised `error` for a conflict with
                         another writer's commit (the referee's landed schedules ask it too)
    plan(ctx, job, facts)    the format's part of the commit plan (`table` of its
                             `plan_type`), decided before the intent (checks that may refuse
                             the commit go here)
    commit(ctx, job, intent) the job's one transaction from the intent, exactly once

and, where the format needs them, hooks with do-nothing defaults: `check_input` (refuse data
the table cannot take, before any task), `file_columns` (the rows as the table's files hold
them), `partition_keys` (the data split by the table's partition spec), `prepare_job` (the
job's context, with what its tasks must know), `file_report`/`take_reports` (what a task adds
to a file's facts, and the job commit takes), `before_setup`/`after_setup` (around the
committer's job setup). A format's layout facts are class attributes the committer takes
over: its `name`, `label`, `markers_root`, `permanent_entries`, `data_root`,
`keeps_partition_columns`, `keeps_empty_partition_values`, and its `plan_type` (the
`TablePlan` its intent records are decoded as, `table` its own struct).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import pyarrow as pa

from ...store import Store
from ..protocol import JobContext, StageContext, TaskAttemptContext
from ..protocol.hooks import FileColumns, PartitionKeys
from ..records.intent import Intent
from .footers import FileFacts
from .plan import TablePlan


class FormatHost(Protocol):
    """What a format may use of the committer holding it (`TableCommitter` is one)."""

    store: Store
    config: Any
    write_mode: str
    input_schema: pa.Schema | None  # the data's, when the face told it (prepare_input)
    partition_by: tuple[str, ...]

    def output_path(self, task: TaskAttemptContext, relpath: str) -> str: ...

    def partitions_of(self, facts: Sequence[FileFacts]) -> tuple[str, ...]: ...

    def schema_of_files(self, ctx: StageContext, facts: Sequence[FileFacts]) -> Any: ...

    def plan_schema(self, intent: Intent) -> pa.Schema | None: ...


class TableFormat:
    """One table format, held by a `TableCommitter` (see the module's docstring)."""

    name: ClassVar[str] = ""  # the committer's name: "delta"
    label: ClassVar[str] = ""  # "Delta Lake"
    markers_root: ClassVar[str] = ""  # where each job's markers lie
    permanent_entries: ClassVar[tuple[str, ...]] = ()  # the table's own log and records
    data_root: ClassVar[str] = ""  # where data files lie in the table ("data" for Iceberg)
    keeps_partition_columns: ClassVar[bool] = False  # data files hold their partition columns
    keeps_empty_partition_values: ClassVar[bool] = False  # '' is a value, not null
    plan_type: ClassVar[type[TablePlan]] = TablePlan  # the intent's plan; `table`: `plan()`'s
    # an append commits through the table's own optimistic concurrency (the catalog's
    # compare-and-swap, rebased and retried, the job's id asked of the table before any
    # retry), not under the destination's claim: appenders go side by side
    appends_without_claim: ClassVar[bool] = False
    # an attempt's announced markers are one batch file (`markers.direct`), not one file each
    batch_markers: ClassVar[bool] = False

    def __init__(self, committer: FormatHost) -> None:
        self.committer = committer

    @property
    def store(self) -> Store:
        return self.committer.store

    @property
    def config(self) -> Any:
        return self.committer.config

    # --- the table ---------------------------------------------------------------------------

    def exists(self) -> bool:
        raise NotImplementedError

    def table(self, *args: Any, **kwargs: Any) -> Any:
        """The format library's own handle on the table (None: there is none)."""
        return None

    def live_files(self) -> list[str]:
        """The live data files of the table's current version (paths in the store)."""
        raise NotImplementedError

    def referenced_files(self) -> set[str]:
        """The data files some version of the table still references: the current one's, and
        those an overwrite removed that earlier versions (time travel) keep until the format's
        own vacuum or snapshot expiry; as paths in the store (relative to the table's root, as
        `store.walk` names them). A data file outside it is an orphan."""
        raise NotImplementedError

    def read_rows(self) -> pa.Table | None:
        """The rows of the table's current version, read by the format's own reader
        (partition columns included); None if there is no table (no committed version)."""
        raise NotImplementedError

    def landed(self, job_uuid: str) -> int:
        """How many versions of the table the job's transaction made (0: not committed)."""
        raise NotImplementedError

    # --- the job's transaction ---------------------------------------------------------------

    def plan(self, ctx: StageContext, job: JobContext, facts: Sequence[FileFacts]) -> Any:
        """The format's part of the plan (the `table` field of its `plan_type`), decided
        before the intent record: checks that may refuse the commit go here, as nothing is
        visible yet."""
        return {}

    def commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> dict[str, Any]:
        """Commit the job's one transaction from the intent record; idempotent (a transaction
        of this job already in the table is found, and not made again). Returns details for
        the job's result (the table version it made)."""
        raise NotImplementedError

    def commits_without_claim(self, job: JobContext) -> bool:
        """Whether the job's commit goes through the table's optimistic concurrency alone,
        without the destination's claim: a plain append of a format that commits so
        (`appends_without_claim`). An append that may change the table's schema
        (`schema_mode="merge"`) keeps the claim, as overwrites do: a change of the table's
        shape is made by one claimed commit at a time."""
        merges = getattr(self.config, "schema_mode", None) is not None
        return job.mode == "append" and self.appends_without_claim and not merges

    def is_conflict(self, error: BaseException) -> bool:
        """Whether `error`, raised by the format's library on a commit, is a conflict with
        another writer's commit (an append tries again); False for every error of a format
        whose commit is a create-if-absent (it has none)."""
        return False

    # --- hooks a format may need -------------------------------------------------------------

    def check_input(self, schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
        """Refuse (ConfigError naming the column) data the table cannot take."""
        return None

    def file_columns(
        self, task: TaskAttemptContext, relpath: str, schema: pa.Schema
    ) -> FileColumns | None:
        """The rows as the table's data files hold them (None: as they are)."""
        return None

    def partition_keys(self, schema: Any, partition_by: Sequence[str]) -> PartitionKeys | None:
        """The data split by the table's partition spec (None: by `partition_by`)."""
        return None

    def prepare_job(self, job: JobContext) -> JobContext:
        """The job's context with what its tasks must know (they rebuild the committer from
        the job's config alone)."""
        return job

    def before_setup(self, job: JobContext) -> None:
        """Checks before the committer sets the job up (nothing is written yet)."""
        return None

    def after_setup(self, job: JobContext) -> None:
        """What the format records once the job is set up (Hudi's pending instant)."""
        return None

    def file_report(
        self, task: TaskAttemptContext, path: str, size: int, meta: Any
    ) -> Mapping[str, Any] | None:
        """What the task attempt that wrote the data file at `path` (`size` bytes, Parquet
        footer `meta`) adds to its facts in its commit message, JSON-ready (None: nothing)."""
        return None

    def take_reports(self, job: JobContext, files: Mapping[str, Mapping[str, Any]]) -> None:
        """The job's files as its tasks reported them (`file_report`), by path, before
        `plan`."""

    def forget(self, job_uuid: str) -> None:
        """Remove what the format keeps of a job being rolled back beside its directory (a
        group commit's request): called before its files are deleted."""
        return None
