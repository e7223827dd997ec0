"""The Delta Lake committer: a job's files in one Delta transaction, made by deltalake
(delta-rs), exactly once.

Data files lie as Delta writers lay them (`col=value/` directories, partition columns only in
the log), named per job, task and attempt. The job's transaction carries an application
transaction `txn(appId="dataferry-<job uuid>", version=1)`: before it commits, and after any
error, the committer asks the table `transaction_version(appId)`, so a commit whose answer
was lost is found in the log and never applied twice (delta-rs itself accepts the same txn
twice: delta-io/delta-rs#2580).

Modes: `append`; `overwrite` (remove actions for every live file, in the same transaction);
`overwrite-partitions` (remove actions for the live files of the partitions the job wrote,
Delta's partition overwrite); `error` (refuse a table that exists). A table that does not
exist is created by the job's transaction, with the data's schema and partition columns.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet

from ...errors import ConfigError, DestinationError, TableCommitConflict
from ...store import Store
from ..job.partitions import partitions_of
from ..protocol import JobContext, StageContext, TaskAttemptContext
from ..protocol.hooks import FileColumns
from ..records.intent import Intent
from .base import TableCommitter, TableConfig
from .delta_log import LOG_DIR, check_log, latest_commit_file
from .delta_types import (
    check_types,
    file_schema,
    first_line,
    log_partition_value,
    log_schema,
    log_type,
    to_files,
)
from .footers import FileFacts
from .layout import partition_values
from .location import table_location
from .schemas import check_same_schema
from .transact import commit_exactly_once


@dataclass(frozen=True)
class DeltaConfig(TableConfig):
    """The Delta committer's options (with deltalake's names).

    storage_options: deltalake's storage options, for a location the store does not carry
        them for (merged over those of an `s3://` store).
    name, description, configuration: the table's, when the job creates it
        (`write_deltalake(name=, description=, configuration=)`).
    schema_mode: None refuses data whose schema differs from the table's (deltalake's
        default); "merge" adds the data's new columns to the table's schema.
    """

    storage_options: dict[str, str] = field(default_factory=dict, repr=False)
    name: str = ""
    description: str = ""
    configuration: dict[str, str] = field(default_factory=dict)
    schema_mode: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.schema_mode not in (None, "merge"):
            raise ConfigError(f"schema_mode must be None or 'merge', got {self.schema_mode!r}")


def app_id(job: JobContext) -> str:
    """The job's application id in the table's `txn` actions."""
    return f"dataferry-{job.job_uuid}"


def _conflict(error: BaseException) -> bool:
    from deltalake.exceptions import CommitFailedError

    return isinstance(error, CommitFailedError)


class DeltaCommitter(TableCommitter):
    name = "delta"
    format_name = "Delta Lake"
    markers_root = "_dataferry/delta-markers"
    permanent_entries = (LOG_DIR,)  # the table's own log
    keeps_empty_partition_values = True  # '' is logged as '' (deltalake), not as null

    def __init__(self, store: Store, config: DeltaConfig) -> None:
        super().__init__(store, config)
        self._location = None
        self.latest_version: int | None = None  # as the last check of the log found it

    # --- the table -------------------------------------------------------------------------

    @property
    def location(self):
        if self._location is None:
            loc = table_location(self.store, "a Delta table")
            options = {**loc.storage_options, **self.config.storage_options}
            self._location = (loc.uri, options)
        return self._location

    def table(self, version: int | None = None) -> Any:
        """The table as it is now (None if there is none). Its log is checked whole first
        (`delta_log`), and deltalake's own errors name the table and its latest commit."""
        from deltalake import DeltaTable

        uri, options = self.location
        if not self.table_exists():
            return None
        try:
            return DeltaTable(uri, version=version, storage_options=options or None)
        except Exception as e:
            raise self.unreadable(e) from e

    def table_exists(self) -> bool:
        from deltalake import DeltaTable

        if not self.store.exists(LOG_DIR):
            return False
        self.latest_version = check_log(self.store)
        uri, options = self.location
        try:
            return DeltaTable.is_deltatable(uri, storage_options=options or None)
        except Exception as e:
            raise self.unreadable(e) from e

    def unreadable(self, error: BaseException) -> DestinationError:
        """deltalake's error reading the table, naming the table and its latest commit."""
        latest = self.store.full_url(latest_commit_file(self.latest_version))
        return DestinationError(
            f"Delta table {self.store.full_url()} cannot be read (its latest commit: {latest})"
            f": {first_line(error)}; dataferry writes nothing on top of a version it cannot "
            "read"
        )

    def table_files(self) -> list[str]:
        dt = self.table()
        if dt is None:
            return []
        actions = pa.table(dt.get_add_actions(flatten=True))
        return sorted(actions.column("path").to_pylist())

    def read_rows(self) -> pa.Table | None:
        """The current version's rows. Its files are read by pyarrow from the log's list
        rather than through `DeltaTable.to_pyarrow_table`, whose file system handler can
        abort the process at exit (delta-io/delta-rs#2184)."""
        dt = self.table()
        if dt is None:
            return None
        schema = pa.schema(dt.schema().to_arrow())
        actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
        parts = list(dt.metadata().partition_columns)
        pieces = []
        for a in actions:
            rows = self.store.read_bytes(a["path"])
            t = pa.parquet.read_table(pa.BufferReader(rows))
            for c in parts:
                value = a.get(f"partition.{c}")
                t = t.append_column(c, pa.array([value] * t.num_rows, schema.field(c).type))
            pieces.append(t.select(schema.names).cast(schema))
        return pa.concat_tables(pieces) if pieces else schema.empty_table()

    def commits_of_job(self, job_uuid: str) -> int:
        """How many versions of the table a job's transaction made (1, or 0; more is a
        transaction applied twice). An optional hook the referee reads."""
        dt = self.table()
        if dt is None:
            return 0
        return sum(1 for e in dt.history() if e.get("dataferry.job_uuid") == job_uuid)

    def referenced_files(self) -> set[str]:
        dt = self.table()
        if dt is None:
            return set()
        files: set[str] = set()
        for version in range(dt.version(), -1, -1):
            try:
                dt.load_as_version(version)
            except Exception:  # gone from the log (its checkpoint and log retention)
                break
            files.update(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())
        return files

    # --- before the job ----------------------------------------------------------------------

    def check_input(self, schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
        self.table_exists()  # a damaged log is refused whatever the mode
        check_types(schema)
        table_schema = log_schema(schema)
        check_log_schema(table_schema)
        dt = self.table() if self.write_mode != "overwrite" else None
        if dt is None:
            return
        table_parts = list(dt.metadata().partition_columns)
        if list(partition_by) != table_parts:
            raise ConfigError(
                f"Delta table {self.store.full_url()} is partitioned by {table_parts}; the "
                f"write gives partition_by={list(partition_by)}: give partition_by={table_parts}"
            )
        if self.config.schema_mode != "merge":
            check_same_schema(
                f"Delta table {self.store.full_url()}",
                pa.schema(dt.schema().to_arrow()),
                table_schema,
                log_type,
                "; pass committer_options={'schema_mode': 'merge'} to add it",
            )

    # --- tasks: the files hold the log's types ----------------------------------------------

    def file_columns(self, task: TaskAttemptContext, relpath: str, schema: pa.Schema) -> Any:
        """The data file's rows converted to the types the log records (`delta_types`):
        microsecond UTC timestamps, signed integers, ..., as deltalake writes them."""
        target = file_schema(schema)
        if target.equals(schema):
            return None
        where = self.store.full_url(self.output_path(task, relpath))
        return FileColumns(schema=target, prepend=lambda rows, _: to_files(rows, target, where))

    # --- job commit ------------------------------------------------------------------------

    def plan_table(
        self, ctx: StageContext, job: JobContext, facts: Sequence[FileFacts]
    ) -> dict[str, Any]:
        exists = self.table_exists()
        if job.mode == "error" and exists:
            raise DestinationError(
                f"Delta table {self.store.full_url()} already exists; write with "
                "mode='append' or mode='overwrite'"
            )
        if self.input_schema is not None:  # a value the log cannot record: refused now,
            types = partition_types(log_schema(self.input_schema), self.partition_by)
            for f in facts:  # before the commit is decided (the job's abort removes its files)
                log_partition_values(f.path, self.partition_by, types)
        plan: dict[str, Any] = {"app_id": app_id(job), "created": not exists}
        if job.mode == "overwrite-partitions":
            plan["partitions"] = partitions_of([f.path for f in facts], include_root=False)
        return plan

    def commit_table(self, ctx: StageContext, job: JobContext, intent: Intent) -> dict[str, Any]:
        plan = intent.payload
        appid = plan["table"]["app_id"]
        facts = [FileFacts.from_json(f) for f in plan["facts"]]
        schema = self.plan_schema(intent)
        partition_by = list(plan["partition_by"])

        def landed() -> dict[str, Any] | None:
            dt = self.table()
            if dt is None or dt.transaction_version(appid) is None:
                return None
            return {"table_version": _version_of(dt, appid)}

        def commit() -> dict[str, Any]:
            return self._commit(job, intent.mode, appid, facts, schema, partition_by, plan)

        retries = self.config.commit_retries if intent.mode == "append" else 0
        result, _ = commit_exactly_once(
            ctx,
            f"job {job.job_id}: Delta transaction of {self.store.full_url()}",
            landed,
            commit,
            _conflict,
            retries,
            label=LOG_DIR,
        )
        return result

    def _commit(
        self,
        job: JobContext,
        mode: str,
        appid: str,
        facts: Sequence[FileFacts],
        schema: pa.Schema | None,
        partition_by: list[str],
        plan: dict[str, Any],
    ) -> dict[str, Any]:
        from deltalake import Schema
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import (
            CommitProperties,
            Transaction,
            create_table_with_add_actions,
        )

        uri, options = self.location
        schema = log_schema(schema) if schema is not None else None
        types = partition_types(schema, partition_by) if schema is not None else {}
        adds = [add_action(f, partition_by, types) for f in facts]
        props = CommitProperties(
            custom_metadata={
                "dataferry.job_id": str(job.job_id),
                "dataferry.job_uuid": job.job_uuid,
            },
            # delta-rs' own retries rebase blind appends; an overwrite must not be rebased
            max_commit_retries=self.config.commit_retries if mode == "append" else 0,
            app_transactions=[Transaction(appid, 1, int(time.time() * 1000))],
        )
        dt = self.table()
        if dt is None and schema is None:
            # no table and no file to take a schema from: a job that wrote nothing (and was
            # given no schema) leaves the location as it was, as an empty write does
            return {"table_version": None}
        if dt is None:
            create_table_with_add_actions(
                uri,
                Schema.from_arrow(schema),
                adds,
                mode="append",
                partition_by=partition_by or None,
                name=self.config.name or None,
                description=self.config.description or None,
                configuration=self.config.configuration or None,
                storage_options=options or None,
                commit_properties=props,
            )
        else:
            if self.config.schema_mode == "merge" and schema is not None:
                add_new_columns(dt, schema)  # a metadata commit first: the columns, nullable
                dt = self.table()
            table_schema = dt.schema()
            if mode == "overwrite" and schema is not None:
                table_schema = Schema.from_arrow(schema)
            try:
                if mode == "overwrite":
                    dt.create_write_transaction(
                        adds,
                        "overwrite",
                        table_schema,
                        partition_by or None,
                        commit_properties=props,
                    )
                else:
                    removes = (
                        remove_actions(dt, plan["table"].get("partitions", []))
                        if mode == "overwrite-partitions"
                        else []
                    )
                    dt.create_write_transaction(
                        [*adds, *removes],
                        "append",
                        table_schema,
                        list(dt.metadata().partition_columns) or None,
                        commit_properties=props,
                    )
            except CommitFailedError as e:
                if mode != "append":
                    raise TableCommitConflict(
                        f"job {job.job_id}: the {mode} of Delta table {self.store.full_url()} "
                        f"conflicts with a commit made since the job read the table: {e}; "
                        "nothing was committed"
                    ) from e
                raise
        done = self.table()
        return {"table_version": _version_of(done, appid) if done is not None else None}


def _version_of(dt: Any, appid: str) -> int:
    """The table version whose commit carries the job's app id (the latest commit's if the
    history does not say)."""
    for entry in dt.history(limit=50):
        if entry.get("dataferry.job_uuid") and appid.endswith(entry["dataferry.job_uuid"]):
            return int(entry.get("version", dt.version()))
    return dt.version()


def partition_types(schema: pa.Schema, partition_by: Sequence[str]) -> dict[str, pa.DataType]:
    """Each partition column's type in the log's schema (a string if the schema lacks it)."""
    return {c: schema.field(c).type if c in schema.names else pa.string() for c in partition_by}


def log_partition_values(
    path: str, partition_by: Sequence[str], types: dict[str, pa.DataType]
) -> dict[str, str | None]:
    """A file's partition values as the log records them (`delta_types.log_partition_value`),
    from its `col=value` directories."""
    values = partition_values(path)
    return {
        k: log_partition_value(k, values.get(k), types.get(k, pa.string())) for k in partition_by
    }


def add_action(
    facts: FileFacts, partition_by: Sequence[str], types: dict[str, pa.DataType] | None = None
) -> Any:
    """A Delta add action for a committed file: its path relative to the table (decoded;
    delta-rs encodes it), size, partition values from its directories, and statistics."""
    from deltalake.transaction import AddAction

    stats = {
        "numRecords": facts.rows,
        "minValues": {k: c.min for k, c in facts.columns.items() if c.min is not None},
        "maxValues": {k: c.max for k, c in facts.columns.items() if c.max is not None},
        "nullCount": {k: c.nulls for k, c in facts.columns.items() if c.nulls is not None},
    }
    return AddAction(
        facts.path,
        facts.size,
        log_partition_values(facts.path, partition_by, types or {}),
        facts.modified_ms,
        True,
        json.dumps(stats, separators=(",", ":")),
    )


def remove_actions(dt: Any, partitions: Sequence[str]) -> list[Any]:
    """Remove actions for the live files of the given partition directories (values compared
    as the log records them)."""
    from deltalake.transaction import RemoveAction

    columns = list(dt.metadata().partition_columns)
    types = partition_types(pa.schema(dt.schema().to_arrow()), columns)
    wanted = [log_partition_values(p + "/x", columns, types) for p in partitions]
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    now = int(time.time() * 1000)
    removes = []
    for a in actions:
        raw = {c: _as_text(a.get(f"partition.{c}")) for c in columns}
        values = {c: log_partition_value(c, v, types[c]) for c, v in raw.items()}
        if any(all(values.get(k) == v for k, v in w.items()) for w in wanted):
            removes.append(RemoveAction(a["path"], True, now, a.get("size_bytes"), values))
    return removes


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def add_new_columns(dt: Any, schema: pa.Schema) -> None:
    """Add the data's columns the table lacks (schema_mode="merge"), as nullable columns."""
    from deltalake import Schema

    have = set(pa.schema(dt.schema().to_arrow()).names)
    new = [f.with_nullable(True) for f in schema if f.name not in have]
    if new:
        fields = Schema.from_arrow(pa.schema(new)).fields
        dt.alter.add_columns(fields if len(fields) > 1 else fields[0])


def check_log_schema(schema: pa.Schema) -> None:
    """Refuse a schema deltalake cannot make a Delta schema of, naming the column (deltalake's
    own message, without the Rust backtrace it carries)."""
    from deltalake import Schema

    for f in schema:
        try:
            Schema.from_arrow(pa.schema([f]))
        except Exception as e:
            raise ConfigError(
                f"column {f.name!r} ({f.type}) cannot be a Delta table's column: {first_line(e)}"
            ) from None
