"""The Apache Hudi committer: a job's files as one copy-on-write instant on a timeline that
dataferry writes itself (there is no Python Hudi writer), read by hudi-rs and laid out as Java
Hudi lays it out (table version 6, timeline layout 1, JSON commit metadata).

    new_job:    the job's instant (`yyyyMMddHHmmssSSS`, UTC, later than any on the timeline)
                goes into the job's config, so every task knows it; recovery finds it again
                by the job uuid in `.hoodie/.temp/<instant>/dataferry-job.json`
    setup_job:  `hoodie.properties` (a new table), `<instant>.commit.requested`, `.inflight`
    tasks:      `col=value/<fileId>_<writeToken>_<instant>.parquet`, each after its marker in
                `.hoodie/.temp/<instant>/` (Hudi's marker layout, direct or the service)
    job commit: an upsert's merge (`upsert.py`: the file groups holding updated keys get
                new slices under the instant), stray marked files deleted, then
                `<instant>.commit` created if absent (the switch: hudi-rs shows a base file iff
                its instant is completed), markers removed
    rollback:   the files the markers name deleted, the pending instant's files deleted, and a
                `<r>.rollback` written (`rollback.py`)

Modes: `append` and `error` (a `commit` of the config's operation: UPSERT, the default, or
INSERT or BULK_INSERT); `overwrite-partitions` and
`overwrite` (a `replacecommit`, INSERT_OVERWRITE / INSERT_OVERWRITE_TABLE, as Hudi's Spark
writer makes them): `<t>.replacecommit.requested`, `.replacecommit.inflight`, `.replacecommit`,
whose `partitionToReplaceFileIds` names every live file group of the partitions written (or
of the table), decided in the plan and checked again at the commit (a table changed since is
a conflict). hudi-rs hides replaced file groups (time travel still sees them); their files
stay on storage, referenced by the earlier instants, until Hudi's cleaner runs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from ....errors import CommitError, ConfigError, DestinationError, TableCommitConflict
from ....markers.base import IOType
from ....store import IOPool, Store, paths
from ...direct.deletion import delete_uncommitted
from ...protocol import (
    CommitPlan,
    JobContext,
    Leftover,
    StageContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from ...protocol.hooks import FileColumns
from ...records.intent import Intent, load_intent
from ..base import TableCommitter
from ..footers import FileFacts
from ..format import FormatHost, TableFormat
from ..layout import partition_dir
from ..transact import commit_exactly_once
from .avro_meta import fastavro
from .config import HudiConfig, instant_of
from .instants import hold_instant, reserve_instant
from .jobs import InstantJobs
from .keys import check_key_type
from .meta import (
    check_meta_input,
    data_schema,
    key_form,
    meta_file_columns,
    meta_options,
    populates_meta_fields,
)
from .metadata import table as metadata_table
from .plan import HudiPlan, HudiTablePlan
from .rollback import (
    delete_untracked_of_instant,
    job_uuid_of_instant,
    refuse_late_write,
    roll_back_instant,
    unreported_files,
)
from .state import HudiTableState
from .timeline import (
    COMPLETED_ACTIONS,
    JOB_UUID_KEY,
    PROPERTIES,
    TEMP,
    avro_schema,
    base_file_name,
    commit_metadata,
    file_id,
    operation_of_mode,
    parse_base_file_name,
    partition_metadata,
    pending_suffixes,
    properties_bytes,
    timeline_file,
    write_token,
)
from .types import file_schema, to_file
from .upsert import KeySpec, UpsertJob, upsert_stage

log = logging.getLogger("dataferry.commit")


class HudiFormat(HudiTableState, TableFormat):
    """Apache Hudi, as the table committer holds it (`TableFormat`): the timeline, the
    table's properties, the job's instant and its commit."""

    name = "hudi"
    label = "Apache Hudi"
    keeps_partition_columns = True
    markers_root = TEMP
    permanent_entries = (".hoodie",)  # the table's own timeline
    plan_type = HudiPlan
    appends_without_claim = True  # inserts: each job's own instant, created if absent

    def __init__(self, committer: FormatHost) -> None:
        super().__init__(committer)
        self._input_known = False

    # --- the job's instant ---------------------------------------------------------------

    def prepare_job(self, job: JobContext) -> JobContext:
        """The job, with its instant in its config: the one the store names for this job
        uuid (recovery), else a new one later than every instant, reserved for this job
        (`instants.py`); the meta-column options."""
        instant = (
            self.config.instant
            or self.find_instant(job.job_uuid)
            or reserve_instant(self.store, job.job_uuid, str(job.job_id))
        )
        meta = meta_options(self.properties(), self.config.record_key)
        return replace(job, config=replace(self.config, instant=instant, **meta))

    def find_instant(self, job_uuid: str) -> str | None:
        for d in self.store.list_or_empty(TEMP):
            if d.is_dir and job_uuid_of_instant(self.store, d.name) == job_uuid:
                return d.name
        return None

    def fresh_instant(self) -> str:
        """A rollback's instant, reserved as a job's is (its record names no job: no
        leftover); `roll_back_instant` releases it once its `.rollback` is made."""
        return reserve_instant(self.store, "", "rollback")

    def commits_without_claim(self, job: JobContext) -> bool:
        """An insert or a bulk insert (new file groups only: `instants.py`) commits without
        the claim. An upsert keeps it: its merge rewrites the file groups holding its keys,
        and two upserts of one group must not both land; Hudi makes its check of the file
        groups and the instant's completion one step under a lock provider, and the claim
        is that lock here (the check and the create are two store operations). So does every
        job of a table keeping Hudi's metadata table (or to keep it): Hudi 0.15 stops reading
        a log at the first block of an instant past the metadata table's latest completed
        one, which would hide a job's block written after another job's pending one."""
        operation = getattr(job.config, "write_operation", "upsert")
        if not super().commits_without_claim(job) or operation not in ("insert", "bulk_insert"):
            return False
        props = self.properties()
        keeps = metadata_table.kept_partitions(props) if props else self.config.metadata_table
        return not keeps

    # --- before the job ------------------------------------------------------------------------

    def check_input(self, schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
        self._input_known = True
        self.check_timeline()
        wanted = self.config.partition_fields
        if wanted is not None and tuple(wanted) != tuple(partition_by):
            raise ConfigError(
                f"partition_fields={list(wanted)} but the write gives "
                f"partition_by={list(partition_by)}: give the same columns"
            )
        # a type Hudi has none for is refused now, naming the column (`types.py`)
        avro_schema(file_schema(schema), self.table_name())
        self.check_keys(self.config)
        for key in self.key_fields(self.config):
            if key not in schema.names:
                raise ConfigError(f"record key field {key!r} is not a column of the data")
            check_key_type(key, schema.field(key).type)
        combine = self.precombine_field(self.config)
        if combine and combine not in schema.names:
            raise ConfigError(f"precombine field {combine!r} is not a column of the data")
        self._check_partitions(partition_by)
        check_meta_input(self.properties(), self.config.record_key, schema, self.store.full_url())

    def _check_partitions(self, partition_by: Sequence[str]) -> None:
        if not self.exists():
            return
        table = self.table_partition_fields()
        if tuple(partition_by) != table:
            raise ConfigError(
                f"Hudi table {self.store.full_url()} is partitioned by {list(table)}; the write "
                f"gives partition_by={list(partition_by)}: give partition_by={list(table)}"
            )

    def check_keys(self, config: HudiConfig) -> None:
        """Refuse (ConfigError) a write with no record key unless it says keyless, and a
        keyless write into a table that has keys; before anything is written."""
        keys = self.key_fields(config)
        url = self.store.full_url()
        if not keys and not config.keyless:
            raise ConfigError(
                f"Hudi table {url} has no record key: give record_key=<column> (Hudi's "
                "hoodie.datasource.write.recordkey.field; an upsert replaces the row of the "
                "same key), or keyless=True for a table without keys (insert only)"
            )
        if keys and config.keyless and not config.record_key:
            raise ConfigError(
                f"keyless=True, but Hudi table {url} has record key {list(keys)}: give "
                "record_key instead, with operation='insert' to add rows without a lookup"
            )

    def before_setup(self, job: JobContext) -> None:
        fastavro()  # a rollback's metadata is Avro: missing, refuse before anything is written
        self.check_keys(job.config)
        self.check_timeline()

    def after_setup(self, job: JobContext) -> None:
        """The instant's record and its pending files (and the table, when it is new and
        its partition columns are known): markers may be made from here on."""
        instant = instant_of(job)
        if any(self.store.exists(timeline_file(instant, a)) for a in COMPLETED_ACTIONS):
            raise CommitError(f"job {job.job_id}: instant {instant} is already completed")
        hold_instant(self.store, instant, job.job_uuid, str(job.job_id))
        if self._input_known or self.config.partition_fields is not None:
            self.create_table(self.config.partition_fields or self.committer.partition_by, None)
        action, operation = operation_of_mode(job.mode, job.config.write_operation)
        requested, inflight = pending_suffixes(action)
        self.store.create_if_absent(timeline_file(instant, requested), b"")
        profile = {
            "partitionToWriteStats": {},
            "compacted": False,
            "extraMetadata": {JOB_UUID_KEY: job.job_uuid},
            "operationType": operation,
        }
        self.store.create_if_absent(
            timeline_file(instant, inflight), json.dumps(profile).encode("utf-8")
        )
        log.info("Hudi table %s: %s %s requested", self.store.full_url(), action, instant)

    def create_table(self, partition_fields: Sequence[str], schema: pa.Schema | None) -> bool:
        """`hoodie.properties` for a table that has none; True if this call made it."""
        if self.exists():
            return False
        name = self.table_name()
        schema = schema if schema is not None else self.committer.input_schema
        schema = file_schema(data_schema(schema)) if schema is not None else None
        create_schema = json.dumps(avro_schema(schema, name)) if schema is not None else ""
        indexed = metadata_table.KEPT if self.config.metadata_table else ()
        if indexed:  # before the properties that name it
            metadata_table.create(self.store, name, self.config.database_name)
        data = properties_bytes(
            name,
            self.config.database_name,
            self.config.record_key,
            partition_fields,
            self.config.precombine_field,
            create_schema,
            indexed,
        )
        return self.store.create_if_absent(PROPERTIES, data)

    # --- tasks ---------------------------------------------------------------------------------

    def file_columns(self, task: TaskAttemptContext, relpath: str, schema: pa.Schema) -> Any:
        """The rows in the types Hudi keeps (`types.py`), with Hudi's meta columns first
        in a table whose files hold them (`meta.py`)."""
        target = file_schema(schema)
        if not getattr(task.job.config, "meta_fields", ""):
            if target == schema:
                return None
            return FileColumns(schema=target, prepend=lambda rows, first: to_file(rows, target))
        path = self.committer.output_path(task, relpath)
        meta = meta_file_columns(task.job.config, task.task_index, path, target)

        def prepend(rows: pa.Table, first: int) -> pa.Table:
            return meta.prepend(to_file(rows, target), first)

        return FileColumns(schema=meta.schema, prepend=prepend)

    # --- job commit ----------------------------------------------------------------------------

    def plan(self, ctx: StageContext, job: JobContext, facts: Sequence[FileFacts]) -> HudiTablePlan:
        instant = instant_of(job)
        # this job's setup may have made `hoodie.properties`: a table with a completed
        # instant is what `error` refuses
        if job.mode == "error" and self.completed_instants():
            raise DestinationError(
                f"Hudi table {self.store.full_url()} already exists; write with mode='append'"
            )
        action, operation = operation_of_mode(job.mode, job.config.write_operation)
        self._check_partitions(
            list(self.committer.partition_by or self.committer.partitions_of(facts))
        )
        for f in facts:
            parsed = parse_base_file_name(paths.name(f.path))
            if parsed is None or parsed[2] != instant:
                raise CommitError(
                    f"job {job.job_id}: {f.path} is not a base file of instant {instant}"
                )
        if action != "replacecommit":
            return HudiTablePlan(instant=instant, action=action, operation=operation)
        written = sorted({partition_dir(f.path) for f in facts})
        partitions = written if job.mode == "overwrite-partitions" else None
        return HudiTablePlan(
            instant=instant,
            action=action,
            operation=operation,
            partitions=partitions,
            replaced=self.replaced(partitions),
        )

    def _landed(self, instant: str, job_uuid: str) -> dict[str, Any] | None:
        meta = self.completed_of(instant)
        if meta is None or meta.get("extraMetadata", {}).get(JOB_UUID_KEY) != job_uuid:
            return None
        return {"instant": instant, "table_version": instant}

    def commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> dict[str, Any]:
        plan: HudiPlan = intent.payload
        instant = plan.table.instant
        facts = plan.facts
        schema = data_schema(
            self.committer.plan_schema(intent)
        )  # Hudi records it without meta columns
        schema = file_schema(schema) if schema is not None else None  # as the files hold it
        action = plan.table.action
        replaced = plan.table.replaced if action == "replacecommit" else None
        slices = plan.table.slices
        path = timeline_file(instant, action)
        what = f"job {job.job_id}: Hudi {action} {instant} of {self.store.full_url()}"

        def landed() -> dict[str, Any] | None:
            return self._landed(instant, job.job_uuid)

        def commit() -> dict[str, Any]:
            moved = self.moved_slices(slices)
            if moved:
                raise TableCommitConflict(
                    f"{what}: the file group of {moved[0]} has a newer slice than the one the "
                    "upsert merged (another commit landed since the plan); nothing was committed"
                )
            if replaced is not None and self.replaced(plan.table.partitions) != replaced:
                raise TableCommitConflict(
                    f"{what}: the table's file groups changed since the job planned its "
                    f"{intent.mode} (another commit landed); nothing was committed"
                )
            self.create_table(plan.partition_by, schema)
            self.save_partition_metadata(ctx.store, facts, instant)
            extra = {JOB_UUID_KEY: job.job_uuid, "dataferry.job-id": str(job.job_id)}
            if schema is not None:
                extra["schema"] = json.dumps(avro_schema(schema, self.table_name()))
            elif self.latest_schema():  # an overwrite with nothing: the table's schema stays
                extra["schema"] = self.latest_schema()
            operation = plan.table.operation
            data = commit_metadata(facts, instant, operation, extra, replaced, slices)
            indexed = metadata_table.kept_partitions(self.properties())
            if indexed:  # the metadata table's deltacommit completes first
                metadata_table.write_instant(ctx.store, instant, indexed, facts, schema)
            if not ctx.store.create_if_absent(path, data):
                found = landed()
                if found is not None:
                    return found
                raise CommitError(f"{what}: {path} exists and is another job's commit")
            log.info("%s: completed with %d files", what, len(facts))
            return {"instant": instant, "table_version": instant}

        if not facts and schema is None and not any((replaced or {}).values()):
            return {"instant": None, "table_version": None}  # nothing to commit, nor a schema
        result, _ = commit_exactly_once(ctx, what, landed, commit, lambda e: False, 0, label=path)
        return result

    @staticmethod
    def save_partition_metadata(store: Store, facts: Sequence[FileFacts], instant: str) -> None:
        """Each partition's `.hoodie_partition_metadata`, where it has none yet, before the
        instant completes (as Hudi's write handles do): without it Java Hudi sees no rows."""
        for part in sorted({f.path.rpartition("/")[0] for f in facts}):
            path, data = partition_metadata(part, instant)
            store.create_if_absent(path, data)

    # --- rollback ------------------------------------------------------------------------------


class HudiCommitter(InstantJobs, TableCommitter):
    """The table committer holding a `HudiFormat`, with Hudi's marker layout: the job's
    markers under its instant (`.hoodie/.temp/<instant>`), files named by file id, write
    token and instant, and a job rolled back as Hudi rolls back an instant; its jobs'
    instants taken and given back around their setup (`jobs.py`)."""

    format_class = HudiFormat
    format: HudiFormat

    def job_dir(self, job: JobContext) -> str:
        return f"{TEMP}/{instant_of(job)}"

    def output_path(self, task: TaskAttemptContext, relpath: str) -> str:
        """`dir/<fileId>_<writeToken>_<instant>.<ext>`: unique per file and attempt."""
        rel = paths.normalize(relpath)
        name = paths.name(rel)
        ext = name.rsplit(".", 1)[1] if "." in name.strip(".") else "parquet"
        token = write_token(task.task_index, task.job.attempt, task.attempt_number)
        fid = file_id(task.job.job_uuid, token, rel)
        return paths.join(paths.parent(rel), base_file_name(fid, token, instant_of(task.job), ext))

    def mark(self, task: TaskAttemptContext, relpath: str) -> str:
        final = super().mark(task, relpath)
        refuse_late_write(self.store, instant_of(task.job), task.attempt_id)
        return final

    def _refuse_to_delete_unreported(
        self, job: JobContext, stray: Sequence[str], messages: Sequence[TaskCommitMessage]
    ) -> None:
        """As direct's, with Hudi's names: a stray file whose write token is a committed
        attempt's was left out of that attempt's commit. Refuse before deleting anything."""
        unreported = unreported_files(self.store, instant_of(job), job.attempt, stray, messages)
        if unreported:
            raise CommitError(
                f"job {job.job_id}: {len(unreported)} files written by committed task attempts "
                f"were not in their task commits, e.g. {self.store.full_url(unreported[0])}; "
                "nothing was deleted. Commit each task through the committer that wrote its "
                "files, or pass the written paths to commit_task"
            )

    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        """As every table committer's, then an upsert's merge (`upsert.py`): the job's
        files become its inserts and the new slices of the file groups it updates."""
        plan = super().plan_commit(ctx, job, messages)
        if plan.payload.table.operation == "UPSERT" and plan.payload.files:
            props = self.format.properties()
            keys = self.format.key_fields(job.config)
            spec = KeySpec(
                keys, key_form(props, keys) == "complex", self.format.precombine_field(job.config)
            )

            def mark(part: str, name: str, kind: IOType) -> object:
                return self.markers(job).create(part, name, kind)

            who = UpsertJob(job.job_uuid, job.attempt, instant_of(job), mark)
            meta = populates_meta_fields(props)
            upsert_stage(ctx, plan, who, self.format.file_groups(), spec, meta)
        return plan

    def committed_files(self, job: JobContext) -> list[str]:
        """The files of the job's completed instant (none if not completed): what to keep."""
        instant = instant_of(job)
        if self.format._landed(instant, job.job_uuid) is None:
            return []
        return _files_of(self.format.completed_of(instant) or {})

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        """Delete the markers with a look before and after, as direct's (late files go)."""
        intent = load_intent(ctx.store, self.job_dir(job), self.plan_type)
        committed = intent.payload.files if intent else self.committed_files(job)
        delete_uncommitted(self, self.job_dir(job), committed, ctx.pool)
        self.markers(job).delete_all()
        delete_untracked_of_instant(
            ctx.store, instant_of(job), committed, ctx.pool, kept=self.referenced_anywhere
        )
        ctx.store.delete(self.job_dir(job), recursive=True)
        type(self).tidy(ctx.store)
        return "deleted"

    def rollback_job(self, job: JobContext) -> None:
        """Roll the job's instant back as Hudi does (`rollback.py`); markers go last."""
        start = time.time()
        instant = instant_of(job)
        mine = job_uuid_of_instant(self.store, instant) in (job.job_uuid, None)
        # a completed instant is committed whoever its record names (a forged job record
        # cannot make it the made-up job's to roll back): its files stay, its timeline too
        completed = self.format.completed_of(instant)
        committed = self.committed_files(job) if completed is None else _files_of(completed)
        with IOPool(self.config.threads) as pool:
            doomed = delete_uncommitted(self, self.job_dir(job), committed, pool)
            doomed += delete_untracked_of_instant(
                self.store, instant, committed, pool, also=doomed, kept=self.referenced_anywhere
            )
        if mine and not committed and completed is None:
            roll_back_instant(self.store, instant, doomed, start, self.format.fresh_instant)
        self.store.delete(self.job_dir(job), recursive=True)
        type(self).tidy(self.store)

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        found = []
        for e in store.list_or_empty(TEMP):
            if not e.is_dir:
                continue
            uuid = job_uuid_of_instant(store, e.name)
            if uuid:  # a marker directory no dataferry job made is Java Hudi's: not ours
                found.append(Leftover(path=e.path, committer=cls.name, job_uuid=uuid))
        return found


def _files_of(meta: dict[str, Any]) -> list[str]:
    """The base files a completed instant's metadata lists."""
    stats = meta.get("partitionToWriteStats") or {}
    return sorted(s["path"] for st in stats.values() for s in st)
