"""The Apache Iceberg committer: a job's files in one Iceberg snapshot, committed through
pyiceberg's catalog, exactly once.

Data files lie under `data/col=value/`, named per job, task and attempt, holding their
partition columns; the rows are split by the table's partition spec, transforms included
(`partitions.py`: key columns such as `ts_day` added before the split, left out of
the files), one partition per file. At job commit each becomes a DataFile built from its
footer (`files.py`) with the table's field ids and spec. The snapshot's summary carries
`dataferry.job-uuid` (and a group's the jobs it carries, `dataferry.group-job-ids`: appends
committing at once share one snapshot, `group`): before the commit and after any error the
table's snapshots are walked for it, so a lost answer is never applied twice. The catalog is
the options' (`load_catalog` properties or a Catalog), else an embedded SQLite catalog in
`_dataferry_iceberg/catalog.db` (local tables); where it and the table are is recorded without
secrets in `_dataferry_iceberg/table.json` and in the intent, for committers with default
options (`dataferry cleanup`, the next job). Modes: `append` (a fast append, retried on
conflicts), `overwrite` and `overwrite-partitions` (one overwrite snapshot; a conflict raises
TableCommitConflict), `error`. A missing table is created in the same catalog commit as the
job's snapshot; `schema_mode="merge"` evolves the schema by name in that commit too.

Before any task writes, the data is checked against the table, or against the table the job
creates, built in memory as the catalog will build it; the tasks cast their rows to the
table's types (`types.py`). A transaction the table or catalog refuses for good
(`catalog.refused`) raises TableCommitRefused: nothing was committed, and the job is
rolled back rather than left decided.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from ....errors import CommitUndone, DestinationError, TableCommitConflict, TableCommitRefused
from ....store import Store
from ...protocol import JobContext, StageContext, TaskAttemptContext
from ...protocol.hooks import FileColumns, PartitionKeys
from ...records.intent import Intent
from ..footers import FileFacts, schema_to_text
from ..format import FormatHost, TableFormat
from ..location import TableLocation
from ..transact import commit_exactly_once
from . import group as groups
from . import partitions as specs
from .catalog import (
    ICEBERG_ROOT,
    TABLE_RECORD,
    current_id,
    ensure_namespace,
    forget_namespace,
    fresh_connections,
    is_conflict,
    job_snapshot,
    refused,
    set_name_mapping,
    snapshot_properties,
    split_identifier,
    without_secrets,
)
from .drafts import DRAFT_KEY, Drafts, basis_of, built_for, draft
from .files import (
    Footers,
    build_data_files,
    check_partition_by,
    check_same_schema,
    in_partitions,
    new_metadata,
    read_footers,
    union_by_name,
)
from .group import Request, carry, group_properties, kept, may_group, own_request, publish, withdraw
from .locate import IcebergLocator
from .memo import memo_create_transaction, memo_transaction
from .plan import IcebergPlan, IcebergTablePlan, IcebergWhere
from .reader import IcebergReader
from .types import arrow_types, file_schema, types_from_text

log = logging.getLogger("dataferry.commit")
NOT_READ = object()  # `_commit`: no table read for it yet


class IcebergFormat(IcebergLocator, IcebergReader, TableFormat):
    """Apache Iceberg, as the table committer holds it (`TableFormat`)."""

    name = "iceberg"
    label = "Apache Iceberg"
    markers_root = "_dataferry/iceberg-markers"
    permanent_entries = (ICEBERG_ROOT,)  # the embedded catalog and the table's record
    data_root = "data"
    keeps_partition_columns = True
    # '' is a value of its own (a `col=` directory), not null: as pyiceberg keeps it
    keeps_empty_partition_values = True
    plan_type = IcebergPlan
    appends_without_claim = True  # the catalog's compare-and-swap (`commit`)
    batch_markers = True  # an attempt's markers: one file, not a directory per partition

    def __init__(self, committer: FormatHost) -> None:
        super().__init__(committer)
        self._location: TableLocation | None = None
        self._catalogs: dict[str, Any] = {}
        self._footers: tuple[str, Footers] = ("", {})  # a job's uuid, its files' footers
        # the existing table's columns as files hold them (found on the driver, sent to the
        # tasks in the job's config): what a column promoted by Iceberg's rules is cast to
        self.table_types: dict[str, pa.DataType] | None = None
        # the (new) table's Iceberg schema and spec, and the split's key columns (check_input)
        self._spec: tuple[Any, Any] | None = None
        self._keys: tuple[specs.KeyColumn, ...] = ()
        # the DataFiles the plan built, and on what (`built_for`): for the first try only
        self._planned: tuple[Any, list[Any]] = (None, [])
        # the table the plan read (None: none), for the first landed check, and jobs tried
        self._plan_read: tuple[str, str, Any] = ("", "", NOT_READ)
        self._tried: set[str] = set()
        # what the tasks build their drafts of DataFiles on (`drafts.py`; check_input), and
        # the drafts a job's tasks sent (`take_reports`)
        self._basis = ""
        self._drafts = Drafts()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)  # a Dask graph carries the committer to its tasks:
        state["_catalogs"] = {}  # open catalogs (connection pools) stay in their process
        state["_planned"] = (None, [])  # a job commit's own, on the driver
        state["_plan_read"] = ("", "", NOT_READ)
        state["_drafts"] = Drafts()
        return state

    # --- before the job ----------------------------------------------------------------------

    def before_setup(self, job: JobContext) -> None:
        self.check_catalog(self.where())

    def check_input(self, schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
        """Every check the table will make, now: against the table, or (none yet) against
        the one the job will create, built in memory as the catalog will build it."""
        self.check_catalog(self.where())
        url = self.store.full_url()
        self._basis = ""
        tbl = self.table()
        if tbl is None:
            if schema is not None:
                made = self.new_table_metadata(file_schema(schema), partition_by)
                self.find_keys(schema, made.schema(), made.spec())
                self._basis = basis_of(made)
            return
        self.check_location(tbl)
        check_partition_by(url, tbl.schema(), tbl.spec(), partition_by)
        if self.config.partition_spec:
            specs.check_same_spec(url, tbl.schema(), tbl.spec(), self.spec_items())
        self.table_types = arrow_types(tbl.schema())
        if schema is None:
            return
        self.find_keys(schema, tbl.schema(), tbl.spec())
        if self.config.schema_mode == "merge":
            evolved = self.evolved(tbl, schema)  # in memory only, never committed
            self.table_types = arrow_types(evolved.table_metadata.schema())
            self._basis = basis_of(evolved.table_metadata)
        else:
            check_same_schema(url, tbl.schema(), schema)
            self._basis = basis_of(tbl.metadata)

    def find_keys(self, data: pa.Schema, schema: Any, spec: Any) -> None:
        """The key columns splitting data of Arrow schema `data` by the table's spec."""
        self._spec = (schema, spec)
        self._keys = specs.key_columns(self.store.full_url(), data, schema, spec)

    def partition_keys(self, schema: Any, partition_by: Sequence[str]) -> PartitionKeys | None:
        """The data split by the table's spec (`partitions.py`): its identity columns
        and a key column per transform, whatever partition_by names of them."""
        if self._spec is None:
            return None
        return specs.partition_keys(schema, partition_by, *self._spec, self._keys)

    def spec_items(self) -> tuple[tuple[str, str], ...]:
        """The options' partition_spec as (transform, column) pairs (none: ())."""
        return specs.parse_spec(self.config.partition_spec or ())

    def prepare_job(self, job: JobContext) -> JobContext:
        """The job, with the table's column types and the split's key columns (found by
        `check_input`) in its config: tasks rebuild the committer from the config alone."""
        config = self.config
        if self._keys:
            config = replace(config, partition_keys=tuple(k.name for k in self._keys))
        if self.table_types:
            types = schema_to_text(pa.schema(list(self.table_types.items())))
            config = replace(config, table_types=types)
        if self._basis:
            config = replace(config, file_basis=self._basis)
        return job if config is self.config else replace(job, config=config)

    def new_table_metadata(self, schema: pa.Schema, partition_by: Sequence[str]) -> Any:
        """The metadata of the table the job creates (`files.new_metadata`), with the
        options' partition_spec, else identity partitions of `partition_by`."""
        props = dict(self.config.properties)
        url = self.store.full_url()
        items = self.spec_items()
        return new_metadata(url, schema, partition_by, self.location_uri, props, items)

    # --- tasks: the files hold the table's types ----------------------------------------------

    def file_columns(
        self, task: TaskAttemptContext, relpath: str, schema: pa.Schema
    ) -> FileColumns | None:
        """The data's columns cast to the types the table holds (`types.py`: the
        type policy, and Iceberg's promotions into an existing table's columns)."""
        text = getattr(task.job.config, "table_types", "")
        keys = getattr(task.job.config, "partition_keys", ())
        return specs.data_file_columns(
            schema, keys, types_from_text(text) if text else self.table_types
        )

    def file_report(
        self, task: TaskAttemptContext, path: str, size: int, meta: Any
    ) -> dict[str, Any] | None:
        """The draft of the file's DataFile (`drafts.py`), on the basis the job's config
        holds (none: no draft)."""
        basis = getattr(task.job.config, "file_basis", "")
        found = draft(basis, path, size, meta) if basis else None
        return {DRAFT_KEY: found} if found else None

    # --- job commit ------------------------------------------------------------------------

    def take_reports(self, job: JobContext, files: Mapping[str, Mapping[str, Any]]) -> None:
        self._drafts = Drafts.of(job.job_uuid, files)

    def plan(
        self, ctx: StageContext, job: JobContext, facts: Sequence[FileFacts]
    ) -> IcebergTablePlan:
        where = self.where()
        self.check_catalog(where)
        tbl = self.table(where)
        if tbl is not None:
            self.check_location(tbl)
        if tbl is not None and job.mode == "error":
            raise DestinationError(
                f"Iceberg table {self.store.full_url()} already exists; write with "
                "mode='append' or mode='overwrite'"
            )
        # each file's DataFile from its task's draft, else from its footer (read once, in
        # parallel); a file the table's spec cannot place is refused now, before the intent
        # (its files are then removed by the job's abort)
        self.footers(job)
        if tbl is not None:
            self.plan_data_files(ctx, job, self.evolved(tbl).table_metadata, facts)
        elif facts:  # the table the commit creates, as the catalog will make it
            schema = self.committer.input_schema or self.committer.schema_of_files(ctx, facts)
            partition_by = self.committer.partition_by or self.committer.partitions_of(facts)
            assert schema is not None
            metadata = self.new_table_metadata(file_schema(schema), partition_by)
            self.plan_data_files(ctx, job, metadata, facts)
        catalog = where["catalog"]
        safe = {"catalog": catalog and without_secrets(catalog), "identifier": where["identifier"]}
        self.record_where(ctx.store, safe)
        read = current_id(tbl) if tbl is not None else None
        self._plan_read = (job.job_uuid, json.dumps(where, sort_keys=True, default=str), tbl)
        where_safe = IcebergWhere(catalog=safe["catalog"], identifier=safe["identifier"])
        return IcebergTablePlan(where=where_safe, created=tbl is None, read_snapshot_id=read)

    def record_where(self, store: Store, safe: dict[str, Any]) -> None:
        """Write down where the catalog and table are, for committers with default options."""
        if self.recorded_where() != safe:
            store.write_bytes(TABLE_RECORD, json.dumps(safe, sort_keys=True).encode())

    def is_conflict(self, error: BaseException) -> bool:
        return is_conflict(error)  # pyiceberg's CommitFailedException (`catalog`)

    def commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> dict[str, Any]:
        where = intent.payload.table.where.of(self.config)
        self.footers(job)  # the plan's footers, or none (a recovered job's are read here)
        own: list[Request] = []  # its commit request, once published (`group`)
        # the table the landed check just read, the job in none of its snapshots: the next try
        # builds on it, unless a wait came between (the table has moved on since)
        just_read: list[Any] = []

        planned = self.plan_read(job, intent, where)

        def landed() -> dict[str, Any] | None:
            just_read.clear()
            if planned:  # the first check of an append planned just now: the plan's read
                tbl = planned.pop()
            else:
                for known in (*self._catalogs.values(), self.config.catalog):
                    fresh_connections(known)  # never our own uncommitted update
                tbl = self.table(where)
            snapshot = job_snapshot(tbl, job.job_uuid) if tbl is not None else None
            if snapshot is not None:
                return {"snapshot_id": snapshot.snapshot_id}
            if not own and tbl is not None and may_group(self.config, intent.mode):
                mine = own_request(tbl, job.job_uuid, where["identifier"], intent.payload.facts)
                own.append(publish(self.store, mine))
            just_read.append(tbl)
            return None

        def commit() -> dict[str, Any]:
            read = just_read.pop() if just_read else NOT_READ
            return self._commit(ctx, job, intent, where, own[0] if own else None, read)

        def wait(seconds: float) -> bool:
            just_read.clear()
            return bool(woken(seconds))

        retries = self.config.commit_retries if intent.mode == "append" else 0
        what = f"job {job.job_id}: Iceberg commit of {self.store.full_url()}"
        try:
            woken = groups.pause(self.store, job.job_uuid)  # once a leader carried it
            done = commit_exactly_once(
                ctx, what, landed, commit, self.is_conflict, retries, "metadata", wait
            )
        except CommitUndone as e:
            why = kept(self.store, self.table(where), own[0] if own else None, e)
            if why is e:
                raise
            raise why from e
        if may_group(self.config, intent.mode):
            withdraw(self.store, job.job_uuid)  # its request, if any (an earlier try's): landed
        return done[0]

    def plan_read(self, job: JobContext, intent: Intent, where: dict[str, Any]) -> list[Any]:
        """[the table this job's plan read, None if none] for an append's first landed check,
        else []. Read just before the intent was decided, by a committer that made no try of
        the job (no connection holds an uncommitted update of it, see `fresh_connections`); a
        table moved on since makes the first try a conflict, retried on a fresh read. Other
        modes, a recovered job (no plan here) and a job tried before read afresh."""
        job_uuid, at, tbl = self._plan_read
        self._plan_read = ("", "", NOT_READ)
        same = job_uuid == job.job_uuid and at == json.dumps(where, sort_keys=True, default=str)
        if not same or tbl is NOT_READ or intent.mode != "append" or job_uuid in self._tried:
            return []
        return [tbl]

    def forget(self, job_uuid: str) -> None:
        withdraw(self.store, job_uuid)  # a rolled-back job's request (`group`), if any

    def _commit(
        self,
        ctx: StageContext,
        job: JobContext,
        intent: Intent,
        where: dict[str, Any],
        own: Request | None,
        read: Any = NOT_READ,
    ) -> dict[str, Any]:
        """Build the job's transaction (carrying other jobs' requests if `own`, the job's, is
        published) and commit it, unless the job landed since (another's group carried it).
        It is built on `read`, the table the landed check has just read (None: no table), else
        on the table loaded now. The table (or catalog) refusing to build it is final and
        nothing was sent: TableCommitRefused, and the job is undone."""
        from pyiceberg.exceptions import (
            CommitFailedException,
            NoSuchNamespaceError,
            ValidationException,
        )

        self._tried.add(job.job_uuid)  # from here on its plan's reads are not used (`plan_read`)
        try:
            tbl = self.table(where) if read is NOT_READ else read
            found = job_snapshot(tbl, job.job_uuid) if tbl is not None else None
            if found is not None:
                return {"snapshot_id": found.snapshot_id}
            tx, created, others = self._transaction(ctx, job, intent, where, tbl, own)
        except Exception as e:
            if not refused(e):
                raise  # the catalog could not be asked (yet): the decided commit stays
            raise TableCommitRefused(
                f"job {job.job_id}: Iceberg table {self.store.full_url()} refuses the job's "
                f"transaction: {type(e).__name__}: {e}; nothing was committed, the job's files "
                "are removed"
            ) from e
        if tx is None:
            # no table and no file to take a schema from: an empty write leaves it as it was
            return {"snapshot_id": None}
        try:
            done = tx.commit_transaction()
        except NoSuchNamespaceError:  # dropped since this process made it: made by the next job
            forget_namespace(self.catalog(where), split_identifier(where["identifier"])[:-1])
            raise
        except (CommitFailedException, ValidationException) as e:
            if intent.mode != "append":
                raise TableCommitConflict(
                    f"job {job.job_id}: the {intent.mode} of Iceberg table "
                    f"{self.store.full_url()} conflicts with a commit made since the job read "
                    f"the table: {e}; nothing was committed"
                ) from e
            raise
        for other in others:
            withdraw(self.store, other.job_uuid)  # landed in this snapshot
        return {"snapshot_id": current_id(done), **({"created": True} if created else {})}

    def _transaction(
        self,
        ctx: StageContext,
        job: JobContext,
        intent: Intent,
        where: dict[str, Any],
        tbl: Any,
        own: Request | None,
    ) -> tuple[Any, bool, list[Request]]:
        """The job's transaction, built on `tbl`, the table as it is now (None: nothing to
        do), whether it creates the table, and the requests of others it carries."""
        mode, schema = intent.mode, self.committer.plan_schema(intent)
        facts = intent.payload.facts
        props = snapshot_properties(self.config, job.job_uuid, str(job.job_id))
        if tbl is None:
            if schema is None:
                return None, True, []
            tx = self._create_transaction(where, schema, list(intent.payload.partition_by))
            with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
                for data_file in self.data_files(ctx, job, tx.table_metadata, facts):
                    append.append_data_file(data_file)
            return tx, True, []
        self.check_location(tbl)
        tx = self.evolved(tbl, schema)
        if tx.table_metadata.name_mapping() is None:
            set_name_mapping(tx)
        new = self.data_files(ctx, job, tx.table_metadata, facts)
        if mode == "append":
            others, theirs = carry(self, ctx, tx, tbl, where["identifier"], own)
            props = group_properties(props, others)
            with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
                for data_file in [*new, *theirs]:
                    append.append_data_file(data_file)
            return tx, False, others
        old = [t.file for t in tbl.scan().plan_files()]
        if mode == "overwrite-partitions":
            old = in_partitions(old, new, tx.table_metadata.default_spec_id)
        with tx.update_snapshot(snapshot_properties=props).overwrite() as swap:
            for data_file in old:
                swap.delete_data_file(data_file)
            for data_file in new:
                swap.append_data_file(data_file)
        return tx, False, []

    def evolved(self, tbl: Any, schema: pa.Schema | None = None) -> Any:
        """A transaction on `tbl`, its schema evolved by name to take the data's when the
        options say `schema_mode="merge"` (the data's schema: `schema`, else the input's)."""
        tx = memo_transaction(tbl)
        schema = schema if schema is not None else self.committer.input_schema
        if self.config.schema_mode == "merge" and schema is not None:
            union_by_name(self.store.full_url(), tx, schema)
        return tx

    def _create_transaction(
        self, where: dict[str, Any], schema: pa.Schema, partition_by: list[str]
    ) -> Any:
        """A transaction creating the table (schema from the data, the options' partition spec
        or identity partitions of `partition_by`, the name mapping that lets readers find
        columns in files without field ids)."""
        catalog = self.catalog(where)
        identifier = where["identifier"]
        ensure_namespace(catalog, split_identifier(identifier)[:-1])
        made = catalog.create_table_transaction(
            identifier,
            schema=file_schema(schema),
            location=self.location_uri,
            properties=dict(self.config.properties),
        )
        tx = memo_create_transaction(made)  # its metadata built once per change (`memo`)
        specs.add_spec(tx, self.spec_items() or tuple(("identity", c) for c in partition_by))
        set_name_mapping(tx)
        return tx

    def data_files(
        self, ctx: StageContext, job: JobContext, metadata: Any, facts: Sequence[FileFacts]
    ) -> list[Any]:
        """DataFiles for the job's files with the table's field ids and partition spec: from
        the tasks' drafts made on the same basis (`drafts.py`), else from their footers, read
        once per job commit (in parallel), not per try."""
        paths = [f.path for f in facts]
        key = built_for(metadata, paths)
        planned, self._planned = self._planned, (None, [])
        if planned[0] == key:  # the plan's, on the same schema, spec fields and metrics
            for data_file in planned[1]:  # the spec's id in this table (a created table's: 1)
                data_file.spec_id = metadata.default_spec_id
            return planned[1]
        drafted: dict[str, Any] = {}
        if self._drafts.job_uuid == job.job_uuid:
            drafted = self._drafts.data_files(metadata, paths, self.file_uri)
        rest = [p for p in paths if p not in drafted]
        if rest:
            footers = read_footers(ctx, rest, self.footers(job))
            built = build_data_files(metadata, rest, footers, self.file_uri)
            drafted.update(zip(rest, built, strict=True))
        ctx.stats.incr("iceberg_data_files_drafted", len(paths) - len(rest))
        return [drafted[p] for p in paths]

    def plan_data_files(
        self, ctx: StageContext, job: JobContext, metadata: Any, facts: Sequence[FileFacts]
    ) -> None:
        """Build the job's DataFiles at its plan (a file the table cannot take is refused
        then), kept for its first try if that builds on the same schema, spec and properties."""
        built = self.data_files(ctx, job, metadata, facts)
        self._planned = (built_for(metadata, [f.path for f in facts]), built)

    def footers(self, job: JobContext | None = None) -> Footers:
        """The footers read for the job being committed (a new job starts afresh)."""
        if job is not None and self._footers[0] != job.job_uuid:
            self._footers = (job.job_uuid, {})
        return self._footers[1]
