"""The Delta Lake committer: a job's files in one Delta transaction, exactly once.

Data files lie as Delta writers lay them (`col=value/` directories, partition columns only in
the log), named per job, task and attempt. The job's transaction carries an application
transaction `txn(appId="dataferry-<job uuid>", version=1)`: before it commits, and after any
error, the committer looks for that txn in every version of the table, so a commit whose
answer was lost is found in the log and never applied twice (delta-rs itself accepts the txn
twice: delta-io/delta-rs#2580).

Modes: `append` (without the destination's claim: put-if-absent, rebased, retried); `overwrite`
(removes of every live file, or those a `predicate` selects); `overwrite-partitions`; `error`.

The table is read through deltalake (live files, schema, protocol; an append's kept per process:
`snapshot`); the commit is written by dataferry, one `_delta_log/<version>.json` created only if
that version is free (`entry`), holding all of the job's actions (`commitInfo` as deltalake writes
it, `protocol` and `metaData` where the job creates the table or changes its schema, `txn`s,
removes, adds). A version another writer took first is a conflict; an append is moved on top of the
winners' adds and removes (a rebase), as delta-rs does. Appends committing at once share one
version (`group`). deltalake makes the checkpoints, after it.

Around it: the log's types (`types`), its check (`log`), protocols (`protocol`), the actions
(`actions`, `transaction`), predicates (`predicate`), the commit's own record (`commit_info`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ....errors import ConfigError, DataferryError, DestinationError, TableCommitConflict
from ...job.partitions import partitions_of
from ...protocol import JobContext, StageContext, TaskAttemptContext
from ...protocol.hooks import FileColumns
from ...records.intent import Intent
from ..footers import FileFacts
from ..format import FormatHost, TableFormat
from ..layout import partition_dir
from ..location import table_location
from ..schemas import check_same_schema
from ..transact import commit_exactly_once
from .actions import (
    check_log_schema,
    job_adds,
    log_partition_values,
    partition_types,
    rows_of,
    store_path,
)
from .commit_info import (
    Metrics,
    after_version,
    app_id,
    checkpoint_due,
    commit_info,
    is_conflict,
    jobs_of,
    transactions,
)
from .entry import VersionTaken, put_commit
from .group import Request, grouped, kept, may_group, pause, withdraw
from .group import commit as group_commit
from .log import LOG_DIR, check_listed_log, refused, unreadable
from .plan import DeltaPlan, DeltaTablePlan
from .predicate import check_columns, matches, normalized, parse
from .protocol import Protocol, check_writable
from .request_check import request_checker
from .snapshot import landed_version, table_view
from .transaction import changed, created, removed, still_fits
from .types import (
    check_types,
    file_schema,
    log_schema,
    log_type,
    to_files,
)

log = logging.getLogger("dataferry.commit")
REUSE_S = 600.0  # how long check_input's read of the table may serve a group's landed check


class DeltaFormat(TableFormat):
    """Delta Lake, as the table committer holds it (`TableFormat`)."""

    name = "delta"
    label = "Delta Lake"
    markers_root = "_dataferry/delta-markers"
    permanent_entries = (LOG_DIR,)  # the table's own log
    keeps_empty_partition_values = True  # '' is logged as '' (deltalake), not as null
    plan_type = DeltaPlan
    appends_without_claim = True  # the commit file's put-if-absent, rebased (`entry`)
    batch_markers = True  # a small append's markers: one file, not a directory per partition

    def __init__(self, committer: FormatHost) -> None:
        super().__init__(committer)
        self._location = None
        self.latest_version: int | None = None  # as the last check of the log found it
        self.listed: list[Any] = [{}, []]  # its commit and checkpoint files
        self.checked: tuple[Any, float] = (None, 0.0)  # check_input's table, and when

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "checked": (None, 0.0)}  # a deltalake table does not pickle

    def view(self) -> Any:
        """The table as an append reads it (`snapshot`: the process's base and the commits
        since), on the log `exists` has just checked; no add actions."""
        commits, checkpoints = self.listed
        latest, load = self.latest_version, self.load
        return table_view(self.store, self.location, latest, commits, checkpoints, load)

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
        (`log`), and deltalake's own errors name the table and its latest commit."""
        if not self.exists():
            return None
        return self.load(version)

    def load(self, version: int | None = None) -> Any:
        """deltalake's table, on a log `exists` has just checked (`table` without the check)."""
        from deltalake import DeltaTable

        uri, options = self.location
        try:
            return DeltaTable(uri, version=version, storage_options=options or None)
        except Exception as e:
            raise unreadable(self.store, self.latest_version, e) from e

    def exists(self) -> bool:
        from deltalake import DeltaTable

        if not self.store.exists(LOG_DIR):
            return False
        self.latest_version, *self.listed = check_listed_log(self.store)
        if self.latest_version is not None:
            return True  # a commit file is there: deltalake's own test would list it too
        uri, options = self.location
        try:
            return DeltaTable.is_deltatable(uri, storage_options=options or None)
        except Exception as e:
            raise unreadable(self.store, self.latest_version, e) from e

    def live_files(self) -> list[str]:
        dt = self.table()
        if dt is None:
            return []
        actions = pa.table(dt.get_add_actions(flatten=True))
        return sorted(store_path(p) for p in actions.column("path").to_pylist())

    def read_rows(self) -> pa.Table | None:
        """The current version's rows. Its files are read by pyarrow from the log's list
        rather than through `DeltaTable.to_pyarrow_table`, whose file system handler can
        abort the process at exit (delta-io/delta-rs#2184)."""
        dt = self.table()
        if dt is None:
            return None
        return rows_of(self.store, dt)

    def read(self, mode: str) -> Any:
        """The table a commit in `mode` builds on: an append's view (`snapshot`), deltalake's
        whole table (with its files) for a mode that removes them."""
        if mode != "append":
            return self.table()
        return self.view() if self.exists() else None

    def landed(self, job_uuid: str) -> int:
        """How many versions of the table a job's transaction made (1, or 0; more is a
        transaction applied twice)."""
        dt = self.table()
        if dt is None:
            return 0
        return sum(1 for e in dt.history() if job_uuid in jobs_of(e))

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
            logged = pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()
            files.update(store_path(p) for p in logged)
        return files

    # --- before the job ----------------------------------------------------------------------

    def check_input(self, schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
        exists = self.exists()  # a damaged log is refused whatever the mode
        check_types(schema)
        table_schema = log_schema(schema)
        check_log_schema(table_schema)
        if self.config.schema_mode == "overwrite":
            if self.committer.write_mode != "overwrite":
                raise ConfigError(
                    "schema_mode='overwrite' replaces the table's schema, which only "
                    "mode='overwrite' does (as in deltalake); write with mode='overwrite', or "
                    "schema_mode='merge' to add columns"
                )
            return  # the job's transaction replaces the schema and partitioning
        if self.config.predicate and self.committer.write_mode != "overwrite":
            raise ConfigError(
                "predicate= replaces the rows it selects, which only mode='overwrite' does "
                f"(as in deltalake), not mode={self.committer.write_mode!r}"
            )
        dt = self.view() if exists else None  # on the log checked a moment ago
        self.checked = (dt, time.monotonic())
        if self.config.predicate:
            parts = list(dt.metadata().partition_columns) if dt is not None else partition_by
            check_columns(self.config.predicate, parse(self.config.predicate), parts)
        if dt is None:
            return
        self.check_writable(dt, self.committer.write_mode)
        how = (
            "write with schema_mode='overwrite' to replace them"
            if self.committer.write_mode == "overwrite"
            else "an overwrite with schema_mode='overwrite' replaces them"
        )
        table_parts = list(dt.metadata().partition_columns)
        if list(partition_by) != table_parts:
            raise ConfigError(
                f"Delta table {self.store.full_url()} is partitioned by {table_parts}; the "
                f"write gives partition_by={list(partition_by)}: give partition_by={table_parts}"
                f" ({how})"
            )
        if self.config.schema_mode != "merge":
            check_same_schema(
                f"Delta table {self.store.full_url()}",
                pa.schema(dt.schema().to_arrow()),
                table_schema,
                log_type,
                "; write with schema_mode='overwrite' to replace the table's schema"
                if self.committer.write_mode == "overwrite"
                else "; pass committer_options={'schema_mode': 'merge'} to add it",
            )

    # --- tasks: the files hold the log's types ----------------------------------------------

    def file_columns(self, task: TaskAttemptContext, relpath: str, schema: pa.Schema) -> Any:
        """The data file's rows converted to the types the log records (`types`):
        microsecond UTC timestamps, signed integers, ..., as deltalake writes them."""
        target = file_schema(schema)
        if target.equals(schema):
            return None
        where = self.store.full_url(self.committer.output_path(task, relpath))
        return FileColumns(schema=target, prepend=lambda rows, _: to_files(rows, target, where))

    # --- job commit ------------------------------------------------------------------------

    def plan(
        self, ctx: StageContext, job: JobContext, facts: Sequence[FileFacts]
    ) -> DeltaTablePlan:
        exists = self.exists()
        if job.mode == "error" and exists:
            raise DestinationError(
                f"Delta table {self.store.full_url()} already exists; write with "
                "mode='append' or mode='overwrite'"
            )
        self.check_written(job, facts)
        partitions = (
            partitions_of([f.path for f in facts], include_root=False)
            if job.mode == "overwrite-partitions"
            else []
        )
        return DeltaTablePlan(app_id=app_id(job), created=not exists, partitions=partitions)

    def check_written(self, job: JobContext, facts: Sequence[FileFacts]) -> None:
        """Before the commit is decided (the job's abort then removes its files): every
        file's partition values can be logged in the column's type, and match the predicate
        of a replace where."""
        parts = self.committer.partition_by or self.committer.partitions_of(facts)
        schema = self.committer.input_schema
        types = (
            partition_types(log_schema(schema), parts)
            if schema is not None
            else {c: pa.string() for c in parts}
        )
        predicate = self.config.predicate
        terms = normalized(parse(predicate), types) if predicate else []
        for f in facts:
            values = log_partition_values(f.path, parts, types)
            if terms and not matches(terms, values):
                raise ConfigError(
                    f"job {job.job_id} wrote rows of partition {values} that do not match "
                    f"predicate {predicate!r} (deltalake refuses them too: written data must "
                    "match the predicate); nothing was committed"
                )

    def check_writable(self, dt: Any, mode: str) -> None:
        """Refuse a table whose protocol needs what dataferry's commits do not do
        (`protocol`), or an append-only table to a write that removes files."""
        where = f"Delta table {self.store.full_url()}"
        configuration = dict(dt.metadata().configuration)
        check_writable(
            Protocol.of(dt), configuration, dt.schema().to_json(), mode != "append", where
        )
        if mode != "append" and configuration.get("delta.appendOnly", "").lower() == "true":
            raise ConfigError(
                f"{where} is append-only (delta.appendOnly=true): mode={mode!r} would remove "
                "files from it, which deltalake refuses too; write with mode='append'"
            )

    def is_conflict(self, error: BaseException) -> bool:
        return is_conflict(error)  # another writer took the version first (`entry`)

    def commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> dict[str, Any]:
        plan: DeltaPlan = intent.payload
        appid = plan.table.app_id
        facts = plan.facts
        schema = self.committer.plan_schema(intent)
        partition_by = list(plan.partition_by)

        # a group's first landed check may be on the table check_input read a moment ago (its
        # walk reads every version since; long after, expired log entries may be gone)
        dt, when = self.checked
        fresh = dt is not None and time.monotonic() - when < REUSE_S
        first = [dt] if fresh and intent.mode == "append" and may_group(self.config) else []

        def landed() -> dict[str, Any] | None:
            dt = read[0] = first.pop() if first else self.read(intent.mode)  # built on
            version = landed_version(dt, appid) if dt is not None else None
            return None if version is None else {"table_version": version}

        tries, read = iter(range(1 << 30)), [None]

        def commit() -> dict[str, Any]:
            attempt = next(tries)
            try:
                dt, read[0] = read[0], None
                return self._commit(
                    job, intent.mode, appid, facts, schema, partition_by, plan, attempt, dt
                )
            except Exception as e:
                if self.is_conflict(e):
                    raise
                why = (
                    e
                    if isinstance(e, DataferryError)
                    else refused(self.store, self.latest_version, e)
                )
                raise kept(self.store, appid, why) from e

        retries = self.config.commit_retries if intent.mode == "append" else 0
        result, _ = commit_exactly_once(
            ctx,
            f"job {job.job_id}: Delta transaction of {self.store.full_url()}",
            landed,
            commit,
            self.is_conflict,
            retries,
            label=LOG_DIR,
            pause=pause(self.store, appid),  # woken once a leader carried its request
        )
        if intent.mode == "append":
            withdraw(self.store, appid)  # its commit request (`group`), if any: landed
        return result

    def _commit(
        self,
        job: JobContext,
        mode: str,
        appid: str,
        facts: Sequence[FileFacts],
        schema: pa.Schema | None,
        partition_by: list[str],
        plan: DeltaPlan,
        tries: int = 0,
        dt: Any = None,  # the table as the landed check just read it (None: read it now)
    ) -> dict[str, Any]:
        """Build the job's one version on the table as deltalake reads it now and create its
        commit file (`entry.put_commit`, or a group's: `group`); then the post-commit hooks."""
        schema = log_schema(schema) if schema is not None else None
        base = dt.version() if dt is not None else None  # the version the landed check read
        dt = dt if dt is not None else self.table()
        if dt is None and schema is None:
            # no table and no file to take a schema from: a job that wrote nothing (and was
            # given no schema) leaves the location as it was, as an empty write does
            return {"table_version": None}
        now = int(time.time() * 1000)
        adds = job_adds(facts, partition_by, schema)
        if dt is None:
            assert schema is not None
            head, parts, configuration = created(self.config, schema, partition_by, now)
            removes: list[dict[str, Any]] = []
            predicate, version = "", 0
        else:
            still_fits(self, job, dt, mode, schema, partition_by)
            head, parts = changed(self.config, dt, mode, schema, partition_by, now)
            removes, predicate = removed(self.config, dt, mode, plan.table.partitions, now)
            configuration = dict(dt.metadata().configuration)
            version = dt.version() + 1
        partitions = len({partition_dir(f.path) for f in facts if partition_by})

        own = Request(
            app_id=appid,
            job_uuid=job.job_uuid,
            base=base if base is not None else -1,
            actions=[*transactions(self.config, appid, now), *adds],
            rows=sum(f.rows for f in facts),
            partitions=partitions,
        )

        def actions(rebases: int, carried: Sequence[Request] = ()) -> list[dict[str, Any]]:
            metrics = Metrics(
                added_files=len(adds) + sum(r.adds for r in carried),
                removed_files=len(removes),
                partitions=partitions + sum(r.partitions for r in carried),
                added_rows=own.rows + sum(r.rows for r in carried),
                retries=tries + rebases,
            )
            info = commit_info(self.config, job, mode, parts, predicate, metrics, now, carried)
            theirs = [a for r in carried for a in r.actions]
            return [info, *head, *removes, *own.actions, *theirs]

        # an append is moved on top of other writers' adds (delta-rs' rebase); another mode
        # read the table it replaces: any commit since is a conflict
        rebases = self.config.commit_retries if mode == "append" and dt is not None else 0
        try:
            if base is not None and grouped(self.config, mode, head, removes):
                may_carry = request_checker(self.store, self.committer)
                landed = group_commit(self.store, own, actions, rebases, may_carry)
            else:
                landed = put_commit(self.store, version, actions, appid, rebases)
        except VersionTaken as e:
            if mode == "append":
                raise
            raise TableCommitConflict(
                f"job {job.job_id}: the {mode} of Delta table {self.store.full_url()} "
                f"conflicts with a commit made since the job read the table: {e}; "
                "nothing was committed"
            ) from e
        if not landed.found and checkpoint_due(configuration, landed.version, self.config):
            after_version(self.location, landed.version, self.config)
        return {"table_version": landed.version}
