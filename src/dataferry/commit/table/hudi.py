"""The Apache Hudi committer: a job's files as one copy-on-write instant on a timeline that
dataferry writes itself (there is no Python Hudi writer), read by hudi-rs and laid out as Java
Hudi lays it out (table version 6, timeline layout 1, JSON commit metadata).

    new_job:    the job's instant (`yyyyMMddHHmmssSSS`, UTC, later than any on the timeline)
                goes into the job's config, so every task knows it; recovery finds it again
                by the job uuid in `.hoodie/.temp/<instant>/dataferry-job.json`
    setup_job:  `hoodie.properties` (a new table), `<instant>.commit.requested`, `.inflight`
    tasks:      `col=value/<fileId>_<writeToken>_<instant>.parquet`, each after its marker in
                `.hoodie/.temp/<instant>/` (Hudi's marker layout, direct or the service)
    job commit: stray marked files deleted, then `<instant>.commit` created if absent (the
                switch: hudi-rs shows a base file iff its instant is completed), markers removed
    rollback:   the files the markers name deleted, the pending instant's files deleted, and a
                `<r>.rollback` written (JSON; Java writes Avro, hudi-rs ignores it)

Modes: `append` (operation INSERT) and `error`; `overwrite` is refused (not built yet).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ...errors import CommitError, ConfigError, DestinationError, NotFound, StoreError
from ...ids import JobId, parse_task_attempt_id
from ...store import IOPool, Store, paths
from ..direct.committer import delete_uncommitted, remove_empty_parents
from ..protocol import JobContext, Leftover, StageContext, TaskAttemptContext, TaskCommitMessage
from ..records.intent import Intent, load_intent
from .base import TableCommitter, TableConfig
from .footers import FileFacts
from .hudi_timeline import (
    HOODIE,
    JOB_RECORD,
    JOB_UUID_KEY,
    PROPERTIES,
    TEMP,
    avro_schema,
    base_file_name,
    commit_metadata,
    fields_of,
    file_id,
    instant_of_name,
    next_instant,
    parse_base_file_name,
    parse_properties,
    pending_suffixes,
    properties_bytes,
    rollback_metadata,
    timeline_file,
    write_token,
)
from .transact import commit_exactly_once

log = logging.getLogger("dataferry.commit")


@dataclass(frozen=True)
class HudiConfig(TableConfig):
    """The Hudi committer's options (with Hudi's names).

    table_name: `hoodie.table.name` ("" : the table directory's name).
    record_key: `hoodie.table.recordkey.fields`, comma-separated or a list (optional).
    partition_fields: `hoodie.table.partition.fields` (None: the write's partition_by).
    precombine_field: `hoodie.table.precombine.field` (optional).
    table_version: `hoodie.table.version`; only 6 (timeline layout 1, JSON metadata).
    database_name: `hoodie.database.name`.
    instant: the job's instant time, set by `new_job` (not an option to give).
    """

    table_name: str = ""
    record_key: str | Sequence[str] = ()
    partition_fields: str | Sequence[str] | None = None
    precombine_field: str = ""
    table_version: int = 6
    database_name: str = ""
    instant: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.table_version != 6:
            raise ConfigError(
                f"table_version {self.table_version!r} is not supported: dataferry writes "
                "Hudi tables of version 6 (timeline layout 1) only"
            )
        object.__setattr__(self, "record_key", fields_of(self.record_key))
        if self.partition_fields is not None:
            object.__setattr__(self, "partition_fields", fields_of(self.partition_fields))
        if self.instant and not (self.instant.isdigit() and len(self.instant) == 17):
            raise ConfigError(f"instant must be yyyyMMddHHmmssSSS, got {self.instant!r}")


def instant_of(job: JobContext) -> str:
    """The job's instant time (set by `HudiCommitter.new_job`)."""
    instant = getattr(job.config, "instant", "")
    if not instant:
        raise CommitError(f"job {job.job_id}: no Hudi instant: build jobs with new_job()")
    return instant


def job_uuid_of_instant(store: Store, instant: str) -> str | None:
    """The uuid of the dataferry job an instant is (its record, else its timeline files)."""
    for path in (
        f"{TEMP}/{instant}/{JOB_RECORD}",
        timeline_file(instant, "inflight"),
        timeline_file(instant, "commit"),
    ):
        try:
            data = json.loads(store.read_bytes(path) or b"{}")
        except (NotFound, ValueError):
            continue
        found = data.get("job_uuid") or data.get("extraMetadata", {}).get(JOB_UUID_KEY)
        if found:
            return str(found)
    return None


class HudiCommitter(TableCommitter):
    name = "hudi"
    format_name = "Apache Hudi"
    keeps_partition_columns = True
    markers_root = TEMP

    def __init__(self, store: Store, config: HudiConfig) -> None:
        super().__init__(store, config)
        self._input_known = False

    @classmethod
    def prepare_mode(cls, mode: str) -> tuple[str, dict[str, Any]]:
        if mode in ("overwrite", "overwrite-partitions"):
            raise ConfigError(
                f"the Hudi committer does not support mode={mode!r} yet (no replacecommit); "
                "write with mode='append' or mode='error'"
            )
        return super().prepare_mode(mode)

    # --- the job's instant ---------------------------------------------------------------

    def new_job(self, job_id: JobId | None = None, attempt: int = 0) -> JobContext:
        """The job, with its instant in its config: the one the store names for this job
        uuid (recovery), else a new one later than every instant on the timeline."""
        job = super().new_job(job_id, attempt)
        instant = self.config.instant or self.find_instant(job.job_uuid) or self.fresh_instant()
        return replace(job, config=replace(self.config, instant=instant))

    def find_instant(self, job_uuid: str) -> str | None:
        for d in self.store.list_or_empty(TEMP):
            if d.is_dir and job_uuid_of_instant(self.store, d.name) == job_uuid:
                return d.name
        return None

    def timeline_instants(self) -> list[str]:
        found = [instant_of_name(e.name) for e in self.store.list_or_empty(HOODIE)]
        found += [e.name for e in self.store.list_or_empty(TEMP) if instant_of_name(e.name + ".")]
        return [i for i in found if i]

    def fresh_instant(self) -> str:
        return next_instant(self.timeline_instants())

    def job_dir(self, job: JobContext) -> str:
        return f"{TEMP}/{instant_of(job)}"

    # --- the table ---------------------------------------------------------------------------

    def table_name(self) -> str:
        """The option, else the table's own (recovery has default options), else the
        directory's name."""
        if self.config.table_name:
            return self.config.table_name
        known = self.properties().get("hoodie.table.name")
        return known or self.store.full_url().rstrip("/").rsplit("/", 1)[-1] or "table"

    def table_exists(self) -> bool:
        return self.store.exists(PROPERTIES)

    def properties(self) -> dict[str, str]:
        try:
            return parse_properties(self.store.read_bytes(PROPERTIES))
        except NotFound:
            return {}

    def completed_instants(self) -> list[tuple[str, str]]:
        """(instant, action) of every completed commit or replacecommit, oldest first."""
        found = []
        for e in self.store.list_or_empty(HOODIE):
            instant = instant_of_name(e.name)
            action = e.name[len(instant) + 1 :] if instant else ""
            if instant and action in ("commit", "replacecommit"):
                found.append((instant, action))
        return sorted(found)

    def commit_of(self, instant: str, action: str = "commit") -> dict[str, Any] | None:
        try:
            return json.loads(self.store.read_bytes(timeline_file(instant, action)))
        except NotFound:
            return None

    def table_files(self) -> list[str]:
        """The base files of completed instants that no later replacecommit replaced."""
        files: dict[str, str] = {}  # path -> fileId
        replaced: set[str] = set()
        for instant, action in self.completed_instants():
            meta = self.commit_of(instant, action) or {}
            for stats in meta.get("partitionToWriteStats", {}).values():
                for s in stats:
                    files[s["path"]] = s.get("fileId", "")
            for ids in meta.get("partitionToReplaceFileIds", {}).values():
                replaced.update(ids)
        return sorted(p for p, fid in files.items() if fid not in replaced)

    def table_partition_fields(self) -> tuple[str, ...]:
        return fields_of(self.properties().get("hoodie.table.partition.fields", ""))

    # --- before the job ------------------------------------------------------------------------

    def check_input(self, schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
        self._input_known = True
        wanted = self.config.partition_fields
        if wanted is not None and tuple(wanted) != tuple(partition_by):
            raise ConfigError(
                f"partition_fields={list(wanted)} but the write gives "
                f"partition_by={list(partition_by)}: give the same columns"
            )
        avro_schema(schema, self.table_name())  # a type Hudi cannot record is refused now
        for key in self.config.record_key:
            if key not in schema.names:
                raise ConfigError(f"record key field {key!r} is not a column of the data")
        self._check_partitions(partition_by)

    def _check_partitions(self, partition_by: Sequence[str]) -> None:
        if not self.table_exists():
            return
        table = self.table_partition_fields()
        if tuple(partition_by) != table:
            raise ConfigError(
                f"Hudi table {self.store.full_url()} is partitioned by {list(table)}; the write "
                f"gives partition_by={list(partition_by)}: give partition_by={list(table)}"
            )

    def setup_job(self, job: JobContext) -> None:
        """The instant's record and its pending files (and the table, when it is new and
        its partition columns are known): markers may be made from here on."""
        super().setup_job(job)
        instant = instant_of(job)
        if self.store.exists(timeline_file(instant, "commit")):
            raise CommitError(f"job {job.job_id}: instant {instant} is already completed")
        record = {"job_uuid": job.job_uuid, "job_id": str(job.job_id), "instant": instant}
        self.store.create_if_absent(
            f"{TEMP}/{instant}/{JOB_RECORD}", json.dumps(record).encode("utf-8")
        )
        if self._input_known or self.config.partition_fields is not None:
            self.create_table(self.config.partition_fields or self.partition_by, None)
        requested, inflight = pending_suffixes("commit")
        self.store.create_if_absent(timeline_file(instant, requested), b"")
        profile = {
            "partitionToWriteStats": {},
            "compacted": False,
            "extraMetadata": {JOB_UUID_KEY: job.job_uuid},
            "operationType": "INSERT",
        }
        self.store.create_if_absent(
            timeline_file(instant, inflight), json.dumps(profile).encode("utf-8")
        )
        log.info("Hudi table %s: instant %s requested", self.store.full_url(), instant)

    def create_table(self, partition_fields: Sequence[str], schema: pa.Schema | None) -> bool:
        """`hoodie.properties` for a table that has none; True if this call made it."""
        if self.table_exists():
            return False
        name = self.table_name()
        schema = schema if schema is not None else self.input_schema
        create_schema = json.dumps(avro_schema(schema, name)) if schema is not None else ""
        data = properties_bytes(
            name,
            self.config.database_name,
            self.config.record_key,
            partition_fields,
            self.config.precombine_field,
            create_schema,
        )
        return self.store.create_if_absent(PROPERTIES, data)

    # --- tasks ---------------------------------------------------------------------------------

    def output_path(self, task: TaskAttemptContext, relpath: str) -> str:
        """`dir/<fileId>_<writeToken>_<instant>.<ext>`: unique per file and attempt."""
        rel = paths.normalize(relpath)
        name = paths.name(rel)
        ext = name.rsplit(".", 1)[1] if "." in name.strip(".") else "parquet"
        token = write_token(task.task_index, task.job.attempt, task.attempt_number)
        fid = file_id(task.job.job_uuid, token, rel)
        return paths.join(paths.parent(rel), base_file_name(fid, token, instant_of(task.job), ext))

    def _refuse_to_delete_unreported(
        self, job: JobContext, stray: Sequence[str], messages: Sequence[TaskCommitMessage]
    ) -> None:
        """As direct's, with Hudi's names: a stray file whose write token is a committed
        attempt's was left out of that attempt's commit. Refuse before deleting anything."""
        instant = instant_of(job)
        committed = set()
        for m in messages:
            a = parse_task_attempt_id(m.attempt_id)
            committed.add(write_token(a.task.index, job.attempt, a.number))
        unreported = []
        for f in stray:
            parsed = parse_base_file_name(paths.name(f))
            if parsed and parsed[2] == instant and parsed[1] in committed and self.store.exists(f):
                unreported.append(f)
        if unreported:
            raise CommitError(
                f"job {job.job_id}: {len(unreported)} files written by committed task attempts "
                f"were not in their task commits, e.g. {self.store.full_url(unreported[0])}; "
                "nothing was deleted. Commit each task through the committer that wrote its "
                "files, or pass the written paths to commit_task"
            )

    # --- job commit ----------------------------------------------------------------------------

    def plan_table(
        self, ctx: StageContext, job: JobContext, facts: Sequence[FileFacts]
    ) -> dict[str, Any]:
        instant = instant_of(job)
        # this job's setup may have made `hoodie.properties`: a table with a completed
        # instant is what `error` refuses
        if job.mode == "error" and self.completed_instants():
            raise DestinationError(
                f"Hudi table {self.store.full_url()} already exists; write with mode='append'"
            )
        if job.mode not in ("append", "error"):
            raise ConfigError(f"the Hudi committer does not support mode={job.mode!r}")
        self._check_partitions(list(self.partition_by or self.partitions_of(facts)))
        for f in facts:
            parsed = parse_base_file_name(paths.name(f.path))
            if parsed is None or parsed[2] != instant:
                raise CommitError(
                    f"job {job.job_id}: {f.path} is not a base file of instant {instant}"
                )
        return {"instant": instant, "action": "commit", "operation": "INSERT"}

    def _landed(self, instant: str, job_uuid: str) -> dict[str, Any] | None:
        meta = self.commit_of(instant)
        if meta is None or meta.get("extraMetadata", {}).get(JOB_UUID_KEY) != job_uuid:
            return None
        return {"instant": instant, "table_version": instant}

    def commit_table(self, ctx: StageContext, job: JobContext, intent: Intent) -> dict[str, Any]:
        plan = intent.payload
        instant = plan["table"]["instant"]
        facts = [FileFacts.from_json(f) for f in plan["facts"]]
        schema = self.plan_schema(intent)
        path = timeline_file(instant, "commit")
        what = f"job {job.job_id}: Hudi instant {instant} of {self.store.full_url()}"

        def landed() -> dict[str, Any] | None:
            return self._landed(instant, job.job_uuid)

        def commit() -> dict[str, Any]:
            self.create_table(plan["partition_by"], schema)
            extra = {JOB_UUID_KEY: job.job_uuid, "dataferry.job-id": str(job.job_id)}
            if schema is not None:
                extra["schema"] = json.dumps(avro_schema(schema, self.table_name()))
            data = commit_metadata(facts, instant, plan["table"]["operation"], extra)
            if not ctx.store.create_if_absent(path, data):
                found = landed()
                if found is not None:
                    return found
                raise CommitError(f"{what}: {path} exists and is another job's commit")
            log.info("%s: completed with %d files", what, len(facts))
            return {"instant": instant, "table_version": instant}

        if not facts and schema is None:
            return {"instant": None, "table_version": None}  # nothing to commit, nor a schema
        result, _ = commit_exactly_once(ctx, what, landed, commit, lambda e: False, 0, label=path)
        return result

    def committed_files(self, job: JobContext) -> list[str]:
        """The files of the job's completed instant (none if it is not completed): what a
        rollback and the last look for late files must keep."""
        instant = instant_of(job)
        if self._landed(instant, job.job_uuid) is None:
            return []
        meta = self.commit_of(instant) or {}
        return sorted(s["path"] for st in meta["partitionToWriteStats"].values() for s in st)

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        """Delete the markers, with a look before and after (as direct's): a file marked
        since the plan is deleted first; one of this instant in the job's partitions that
        the commit does not list (written after the markers went) is deleted after."""
        intent = load_intent(ctx.store, self.job_dir(job))
        committed = intent.payload["files"] if intent else self.committed_files(job)
        delete_uncommitted(ctx.store, self.job_dir(job), committed, ctx.pool)
        self.markers(job).delete_all()
        delete_untracked_of_instant(ctx.store, instant_of(job), committed, ctx.pool)
        ctx.store.delete(self.job_dir(job), recursive=True)
        type(self).tidy(ctx.store)
        return "deleted"

    # --- rollback ------------------------------------------------------------------------------

    def rollback_job(self, job: JobContext) -> None:
        """Roll the job's instant back as Hudi does: delete the files its markers name (and
        late ones of the instant beside them), its pending timeline files, then write a
        `<r>.rollback`; the marker directory (with the job's record) goes last."""
        start = time.time()
        instant = instant_of(job)
        mine = job_uuid_of_instant(self.store, instant) in (job.job_uuid, None)
        committed = self.committed_files(job)
        with IOPool(self.config.threads) as pool:
            doomed = delete_uncommitted(self.store, self.job_dir(job), committed, pool)
            doomed += delete_untracked_of_instant(self.store, instant, committed, pool, also=doomed)
        if mine and not committed:
            self._roll_back_instant(instant, doomed, start)
        self.store.delete(self.job_dir(job), recursive=True)
        type(self).tidy(self.store)

    def _roll_back_instant(self, instant: str, deleted: Sequence[str], start: float) -> None:
        requested, inflight = pending_suffixes("commit")
        pending = [timeline_file(instant, s) for s in (inflight, requested)]
        found = [p for p in pending if self.store.exists(p)]
        if not found and not deleted:
            return  # nothing of the instant on the timeline or in the table
        for p in found:
            self.store.delete(p)
        r = self.fresh_instant()
        took = int((time.time() - start) * 1000)
        self.store.create_if_absent(
            timeline_file(r, "rollback"), rollback_metadata(r, instant, deleted, took)
        )
        log.warning(
            "Hudi table %s: rolled back instant %s (%d files deleted) as %s.rollback",
            self.store.full_url(),
            instant,
            len(deleted),
            r,
        )

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


def delete_untracked_of_instant(
    store: Store,
    instant: str,
    committed: Sequence[str],
    pool: IOPool,
    also: Sequence[str] = (),
) -> list[str]:
    """Base files of the instant that its commit does not list, in the directories of its
    committed files and of `also`: written by a given-up attempt after the last look at the
    markers. One listing per directory."""
    keep = set(committed)
    doomed = []
    for d in sorted({paths.parent(f) for f in (*keep, *also)}):
        for st in store.list_or_empty(d):
            parsed = None if st.is_dir else parse_base_file_name(st.name)
            if parsed and parsed[2] == instant and st.path not in keep:
                doomed.append(st.path)
    pool.for_each(_delete_quietly(store), doomed, adaptive=True)
    remove_empty_parents(store, doomed)
    return doomed


def _delete_quietly(store: Store):
    def delete(path: str) -> bool:
        try:
            return store.delete(path)
        except StoreError:
            return False

    return delete
