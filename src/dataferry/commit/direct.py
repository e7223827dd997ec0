"""The direct committer: zero rename on any store, made safe by write markers.

Tasks write each data file straight to its final path, under a name unique to the job, the task
and the attempt, after creating a marker for it. Task commit reports the attempt's files to the
driver. Job commit reconciles: every marked file that no committed attempt reported (a partial
file of a failed attempt, a speculative duplicate) is deleted; then the commit record
`_dataferry/commits/<jobUUID>.json` (the complete file list) and `_SUCCESS` are written and the
markers deleted. Abort, and `dataferry cleanup`, roll a failed job back by deleting every marked
file.

Plain readers see files while the job runs, as with Hudi and Databricks' transactional writes;
readers that must not see in-flight files use `list_committed(dest)`, which returns only files
of committed jobs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import CommitError, NotFound
from ..markers import DirectMarkers, MarkerClient, ServiceMarkers, WriteMarkers, marker_dir
from ..stats import StageClock
from ..store import IOPool, Store, open_store, paths
from .protocol import Committer, JobCommitResult, JobContext, TaskAttemptContext, TaskCommitMessage
from .success import SUCCESS_FILE, SuccessData

COMMITS_DIR = "_dataferry/commits"
COMMITTER_NAME = "dataferry.commit.direct.DirectCommitter"


@dataclass(frozen=True)
class DirectConfig:
    """
    markers: `direct` (one marker file each) or `service` (the batching marker service;
        `hoodie.write.markers.type` TIMELINE_SERVER_BASED).
    service_url, service_token: where the marker service listens, and its shared secret.
    threads: `hoodie.finalize.write.parallelism` and `hoodie.markers.delete.parallelism`: deletes
        of stray files and listing of markers in parallel.
    mark_successful_jobs: write `_SUCCESS`.
    """

    markers: str = "direct"
    service_url: str = ""
    service_token: str = ""
    threads: int = 32
    mark_successful_jobs: bool = True

    def __post_init__(self) -> None:
        from ..errors import ConfigError

        if self.markers not in ("direct", "service"):
            raise ConfigError(f"markers must be 'direct' or 'service', got {self.markers!r}")
        if self.markers == "service" and not self.service_url:
            raise ConfigError("markers='service' needs service_url")


@dataclass
class DirectJobCommitResult(JobCommitResult):
    stray_files_deleted: int = 0
    markers_found: int = 0


def commit_record_path(job_uuid: str) -> str:
    return f"{COMMITS_DIR}/{job_uuid}.json"


def unique_name(relpath: str, task: TaskAttemptContext) -> str:
    """`dir/name.ext` -> `dir/name-<job8>-t<task>-a<attempt>.ext`: no two attempts collide."""
    rel = paths.normalize(relpath)
    parent, name = paths.parent(rel), paths.name(rel)
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    tag = f"-{task.job.job_uuid[:8]}-t{task.task_index}-a{task.attempt_number}"
    return paths.join(parent, f"{stem}{tag}{'.' + ext if ext else ''}")


class DirectCommitter(Committer):
    name = "direct"
    writes_in_place = True  # data is visible to plain readers during the job
    permanent_entries = ("_dataferry",)  # commit records stay with the table

    def __init__(self, store: Store, config: DirectConfig) -> None:
        super().__init__(store, config)
        self._announced: set[str] = set()  # marked ahead by announce_files, not yet written
        self._announced_lock = threading.Lock()

    def markers(self, job: JobContext) -> WriteMarkers:
        directory = marker_dir(job.job_uuid)
        if self.config.markers == "service":
            client = MarkerClient(self.config.service_url, self.config.service_token)
            return ServiceMarkers(client, self.store, directory)
        return DirectMarkers(self.store, directory, self.config.threads)

    # --- job and task ----------------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        self.check_destination()
        if self.store.exists(commit_record_path(job.job_uuid)):
            raise CommitError(f"job {job.job_uuid} already has a commit record: job id reused?")

    def setup_task(self, task: TaskAttemptContext) -> None:
        pass

    def task_work_path(self, task: TaskAttemptContext) -> str:
        return ""  # the destination itself

    def output_path(self, task: TaskAttemptContext, relpath: str) -> str:
        return unique_name(relpath, task)

    def mark(self, task: TaskAttemptContext, relpath: str) -> str:
        """Create the marker for a file about to be written (unless it was announced with the
        attempt's other files); returns its final path."""
        final = self._final(task, relpath)
        with self._announced_lock:
            announced = final in self._announced
            self._announced.discard(final)
        if not announced:
            self.markers(task.job).create(paths.parent(final), paths.name(final))
        return final

    def announce_files(self, task: TaskAttemptContext, relpaths: Sequence[str]) -> None:
        """Markers for every file the attempt is about to write, in one request to the marker
        service. Direct markers stay one per file, made as each file is opened: made all at
        once they would only meet the store's request ceiling in a burst."""
        markers = self.markers(task.job)
        if not markers.batches:
            return
        finals = [self._final(task, r) for r in relpaths]
        markers.create_many([(paths.parent(f), paths.name(f)) for f in finals])
        with self._announced_lock:
            self._announced.update(finals)

    def _final(self, task: TaskAttemptContext, relpath: str) -> str:
        final = self.output_path(task, relpath)
        if paths.is_hidden(final):
            raise CommitError(f"task {task.attempt_id}: cannot write {relpath!r}: not a data path")
        return final

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        final = self.mark(task, relpath)
        self.store.write_bytes(final, data)
        return final

    def open_file(self, task: TaskAttemptContext, relpath: str) -> BinaryIO:
        return self.store.open_write(self.mark(task, relpath))

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return True

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        with self.stats.duration("task_stage_commit"):
            files = tuple(paths.normalize(f) for f in written)
        return TaskCommitMessage(
            job_id=str(task.job.job_id),
            task_id=str(task.task_id),
            attempt_id=str(task.attempt_id),
            committer=self.name,
            files=files,
        )

    def abort_task(self, task: TaskAttemptContext) -> None:
        pass  # its files are marked: job commit deletes them, or job abort does

    # --- job commit: reconcile against the markers -------------------------------------------

    def commit_job(
        self, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> DirectJobCommitResult:
        self.check_messages(job, messages)
        clock = StageClock(self.stats)
        markers = self.markers(job)
        committed = {f for m in messages for f in m.files}
        with IOPool(self.config.threads) as pool, self.stats.duration("committer_commit_job"):
            with clock.stage("list_markers"):
                marked = markers.data_paths()
            unmarked = committed - marked
            if unmarked:
                raise CommitError(
                    f"job {job.job_id}: {len(unmarked)} reported files have no marker, e.g. {sorted(unmarked)[0]}"
                )
            stray = sorted(marked - committed)
            with clock.stage("delete_stray_files"):
                pool.for_each(self.store.delete, stray, adaptive=True)
            with clock.stage("save_records"):
                record = {
                    "jobId": job.job_uuid,
                    "job": str(job.job_id),
                    "committed": time.time(),
                    "files": sorted(committed),
                }
                self.store.write_bytes(
                    commit_record_path(job.job_uuid), json.dumps(record).encode()
                )
                if self.config.mark_successful_jobs:
                    success = SuccessData.for_job(
                        COMMITTER_NAME,
                        job,
                        f"Job {job.job_id} written in place, reconciled against markers",
                        metrics={
                            "committer_files_committed": len(committed),
                            "committer_stray_files_deleted": len(stray),
                        },
                        diagnostics={
                            "commit_record": commit_record_path(job.job_uuid),
                            "markers": self.config.markers,
                        },
                        filenames=[self.store.full_url(f) for f in sorted(committed)[:100]],
                    )
                    self.store.write_bytes(SUCCESS_FILE, success.to_bytes())
            with clock.stage("delete_markers"):
                markers.delete_all()
        stages = clock.finish()
        return DirectJobCommitResult(
            job_id=str(job.job_id),
            committer=self.name,
            files=len(committed),
            bytes=0,
            success_path=SUCCESS_FILE if self.config.mark_successful_jobs else None,
            stage_seconds=stages,
            iostatistics=self.stats,
            filenames=sorted(committed)[:100],
            stray_files_deleted=len(stray),
            markers_found=len(marked),
        )

    # --- rollback --------------------------------------------------------------------------

    def abort_job(self, job: JobContext) -> None:
        """Roll back: delete every file the job's markers name (works with the service down:
        its MARKERS files are read from the store), then the markers. A job that already has a
        commit record is committed: only its leftover markers go."""
        with self.stats.duration("job_stage_abort"):
            markers = self.markers(job)
            if not self.store.exists(commit_record_path(job.job_uuid)):
                with IOPool(self.config.threads) as pool:
                    pool.for_each(
                        self.store.delete,
                        sorted(markers.data_paths(include_append=True)),
                        adaptive=True,
                    )
            markers.delete_all()

    def cleanup_job(self, job: JobContext) -> None:
        self.markers(job).delete_all()


def list_committed(dest: str | Store) -> list[str]:
    """Files of committed jobs only (for readers that must not see files in flight)."""
    store = dest if isinstance(dest, Store) else open_store(dest)
    files: set[str] = set()
    try:
        records = store.list(COMMITS_DIR)
    except NotFound:
        return []
    for r in records:
        if r.name.endswith(".json"):
            files.update(json.loads(store.read_bytes(r.path))["files"])
    return sorted(f for f in files if store.exists(f))


def _register() -> None:
    from .factory import CommitterKind, register

    register(
        CommitterKind(
            "direct",
            DirectConfig,
            DirectCommitter,
            "direct committer: files written in place, reconciled and rolled back by markers",
        )
    )


_register()
