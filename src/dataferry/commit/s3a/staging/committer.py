"""The S3A staging committers: `directory` and `partitioned`.

A task attempt writes its files to a local staging directory on the worker. Task commit
uploads each file to its final key as a multipart upload that is left uncompleted and saves
the attempt's pendingset in a consistent store (the job's own directory in the destination by
default). Job commit loads the chosen attempts' pendingsets, applies the conflict mode and
completes every upload in parallel: no byte is copied at commit, and nothing is visible before.

The two differ only in the conflict mode's scope: `directory` applies it to the whole
destination, `partitioned` to each partition directory the job writes (files at the root are
left alone, as S3A's partitioned committer leaves them).

Unlike the magic committer, the tasks need no special paths in the store and write at local
disk speed; the price is local disk for each attempt's output and an upload of every byte at
task commit rather than while writing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import BinaryIO

from ....errors import CommitError, ConfigError, JobCommitError, TaskCommitError
from ....store import IOPool, Store, open_store, paths
from ...job.partitions import partitions_of
from ...job.stages import check_destination
from ...protocol import JobContext, StageContext, TaskAttemptContext, TaskCommitMessage
from ...records.intent import load_intent
from ..magic.files import PENDINGSET_MAX_BYTES, PendingCommit, PendingSet
from ..uploads import (
    UploadCommitter,
    abort_at_keys,
    abort_quietly,
    check_conflicts,
    read_pendingset,
)
from . import layout
from .config import StagingConfig
from .records import UploadsRecord
from .upload import (
    LocalFile,
    record_keys,
    record_uploads,
    save_pendingset,
    start_uploads,
    upload_parts,
)

__all__ = ["DirectoryStagingCommitter", "PartitionedStagingCommitter", "StagingConfig"]


class DirectoryStagingCommitter(UploadCommitter):
    """Staging committer whose conflict mode covers the whole destination."""

    name = "directory"
    job_prefix = layout.STAGING_PREFIX
    config: StagingConfig

    def __init__(self, store: Store, config: StagingConfig) -> None:
        super().__init__(store, config)

    # --- where things are ------------------------------------------------------------------

    def job_dir(self, job: JobContext) -> str:
        return layout.job_attempt_dir(job)

    def pendingset_store(self) -> Store:
        """Where task commits save pendingsets: `pendingset_dir`, else the destination."""
        if self.config.pendingset_dir:
            return open_store(self.config.pendingset_dir)
        return self.store

    def local_store(self, task: TaskAttemptContext) -> Store:
        """The attempt's staging directory on this worker's local disk."""
        return open_store(layout.local_attempt_dir(self.config.staging_dir, task))

    def conflict_scopes(self, files: Sequence[str]) -> list[str] | None:
        """What the conflict mode looks at: the whole destination (None)."""
        return None

    # --- job and task setup ----------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        self.require_multipart()
        check_destination(self.store)
        with self.stats.duration("job_stage_setup"):
            if self.store.exists(self.job_dir(job)):
                raise CommitError(
                    f"staging directory {self.store.full_url(self.job_dir(job))} exists: "
                    "job id reused?"
                )
            if self.config.conflict_mode == "fail" and self.conflict_scopes(()) is None:
                # S3A's directory committer refuses at setup, before any task runs; the check
                # is made again at job commit, when the destination's claim is held
                check_conflicts(self.stage_context(job, 1), "fail", None)

    def setup_task(self, task: TaskAttemptContext) -> None:
        """Claim the attempt id (an engine that reruns an attempt under the same id is
        refused) and give the attempt an empty local staging directory."""
        record = UploadsRecord(str(task.attempt_id), [])
        if not self.store.create_if_absent(layout.uploads_record(task), record.to_bytes()):
            raise CommitError(
                f"task attempt {task.attempt_id} was already set up; not running it twice"
            )
        self._remove_local(layout.local_attempt_dir(self.config.staging_dir, task))

    def task_work_path(self, task: TaskAttemptContext) -> str:
        return layout.uploads_record(task)

    # --- writing: to local disk ------------------------------------------------------------

    def _data_path(self, task: TaskAttemptContext, relpath: str) -> str:
        rel = paths.normalize(relpath)
        if not rel or paths.is_hidden(rel):
            raise CommitError(f"task {task.attempt_id}: cannot write {relpath!r}: not a data path")
        return rel

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        rel = self._data_path(task, relpath)
        self.local_store(task).write_bytes(rel, data)
        return rel

    def open_file(self, task: TaskAttemptContext, relpath: str) -> BinaryIO:
        return self.local_store(task).open_write(self._data_path(task, relpath))

    # --- task commit -----------------------------------------------------------------------

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return True

    def part_size(self) -> int:
        return max(self.config.part_size, self.store.min_part_size)

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        job = task.job
        pstore = self.pendingset_store()
        ppath = layout.pendingset_path(job, str(task.attempt_id))
        if pstore.exists(ppath):
            raise TaskCommitError(
                f"task attempt {task.attempt_id} is already committed ({pstore.full_url(ppath)})"
            )
        local = self.local_store(task)
        files = [LocalFile(s.path, s.size) for s in local.walk("") if not s.is_dir]
        ctx = self.stage_context(job, threads=self.config.upload_threads)
        record_path = layout.uploads_record(task)
        record = UploadsRecord(str(task.attempt_id), [], {}, pstore.full_url(ppath))
        started: dict[str, str] = {}
        with self.stats.duration("task_stage_commit"):
            record_keys(ctx, record_path, record, files)
            try:
                start_uploads(ctx, files, started)
                record_uploads(ctx, record_path, record, started)
                etags = upload_parts(ctx, local, files, started, self.part_size())
                commits = [
                    PendingCommit(
                        f.key, started[f.key], etags[f.key], f.size, job.job_uuid, str(task.task_id)
                    )
                    for f in files
                ]
                pset = PendingSet(job.job_uuid, str(task.attempt_id), commits)
                save_pendingset(ctx, pstore, ppath, pset, self.store)
            except Exception:
                # an ordinary failure aborts what it started; a dying process aborts nothing
                # (its record names every upload for whoever cleans up the job)
                abort_quietly(self.store, started.items())
                raise
            self._remove_local(layout.local_attempt_dir(self.config.staging_dir, task))
        staged = sum(f.size for f in files)
        return TaskCommitMessage(
            job_id=str(job.job_id),
            task_id=str(task.task_id),
            attempt_id=str(task.attempt_id),
            committer=self.name,
            files=tuple(f.key for f in files),
            bytes=staged,
            iostatistics=ctx.stats.snapshot(),
            extra={
                "pendingset": pstore.full_url(ppath),
                "bytes_uploaded": staged,
                "bytes_staged_locally": staged,
            },
        )

    def abort_task(self, task: TaskAttemptContext) -> None:
        """Delete the attempt's local files and abort the uploads it started (by id: another
        attempt of the same task may be uploading the same keys)."""
        with self.stats.duration("task_stage_abort_task"):
            self._remove_local(layout.local_attempt_dir(self.config.staging_dir, task))
            record = UploadsRecord.load(self.store, layout.uploads_record(task))
            if record is None:
                return
            abort_quietly(self.store, record.uploads.items())
            self._delete_pendingset(record)
            if not record.unrecorded_keys():  # else the job's cleanup aborts those by key
                self.store.delete(layout.uploads_record(task))

    # --- job commit (on the shared stages of job/commit.py) --------------------------------------

    def pending_commits_of(self, job: JobContext, m: TaskCommitMessage) -> list[PendingCommit]:
        path = layout.pendingset_path(job, m.attempt_id)
        raw, source = read_pendingset(self.pendingset_store(), path, m, PENDINGSET_MAX_BYTES)
        pset = PendingSet.from_bytes(raw, self.store, source)
        if pset.attempt() not in ("", m.attempt_id):
            raise JobCommitError(
                f"pendingset {source} belongs to attempt {pset.attempt()}, not {m.attempt_id}"
            )
        return pset.commits

    def success_committer_name(self) -> str:
        return f"dataferry.commit.staging.{type(self).__name__}"

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        """After the uploads are completed: abort what every other attempt left pending (those
        the driver did not choose, those that died, zombies), then remove the job's files."""
        intent = load_intent(self.store, self.job_dir(job), self.plan_type)
        chosen = frozenset(intent.payload.attempts) if intent else frozenset()
        self._abort_attempts(job, ctx.pool, keep=chosen)
        self._remove_job_files(job)
        return "deleted"

    # --- abort and cleanup -----------------------------------------------------------------

    def rollback_job(self, job: JobContext) -> None:
        """Abort every upload the job started and remove its files. Without an intent record
        no upload was completed, so nothing of the job was ever visible."""
        with IOPool(self.config.threads) as pool:
            self._abort_attempts(job, pool, keep=frozenset())
        self._remove_job_files(job)

    def _abort_attempts(self, job: JobContext, pool: IOPool, keep: frozenset[str]) -> None:
        """Abort the uploads of every attempt not in `keep`: by id where its record has one,
        by key where it died before recording the id (only once the job is over: while it
        runs another attempt of the task may be uploading the same key)."""
        records = [
            r
            for st in self.store.list_or_empty(layout.tasks_dir(job))
            if st.name.endswith(layout.UPLOADS_SUFFIX)
            and (r := UploadsRecord.load(self.store, st.path)) is not None
        ]

        def abort(r: UploadsRecord) -> None:
            if r.attempt_id in keep:
                return
            abort_quietly(self.store, r.uploads.items())
            abort_at_keys(self.store, r.unrecorded_keys())
            self._delete_pendingset(r)

        pool.for_each(abort, records)

    def _delete_pendingset(self, record: UploadsRecord) -> None:
        """Delete an attempt's pendingset, wherever its record says it went."""
        if not record.pendingset:
            return
        try:
            rel = self.store.relative_path(record.pendingset)
        except ConfigError:  # in the store `pendingset_dir` named
            parent, _, name = record.pendingset.rpartition("/")
            open_store(parent).delete(name)
            return
        self.store.delete(rel)

    def _remove_job_files(self, job: JobContext) -> None:
        """The job's directory in the destination, its pendingsets elsewhere, and its local
        staging directory on this host."""
        if self.config.pendingset_dir:
            self.pendingset_store().delete(layout.jobs_dir(job), recursive=True)
        self._remove_local(layout.local_job_dir(self.config.staging_dir, job))
        self.store.delete(layout.jobs_dir(job), recursive=True)

    @staticmethod
    def _remove_local(directory: str) -> None:
        parent, name = os.path.split(directory)
        open_store(parent).delete(name, recursive=True)  # False where it is not there


class PartitionedStagingCommitter(DirectoryStagingCommitter):
    """Staging committer whose conflict mode covers only the partitions the job writes."""

    name = "partitioned"

    def conflict_scopes(self, files: Sequence[str]) -> list[str] | None:
        """Each partition directory a file of the job goes to; files at the root are
        appended whatever the mode (S3A's partitioned committer ignores them)."""
        return partitions_of(files, include_root=False)
