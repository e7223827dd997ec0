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
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import CommitError, NotFound
from ..ids import parse_task_attempt_id
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
    tag = _attempt_tag(task.job.job_uuid, task.task_index, task.attempt_number)
    return paths.join(parent, f"{stem}{tag}{'.' + ext if ext else ''}")


def _attempt_tag(job_uuid: str, task_index: int, attempt_number: int) -> str:
    return f"-{job_uuid[:8]}-t{task_index}-a{attempt_number}"


_TAG_RE = re.compile(r"(-[^/]{8}-t\d+-a\d+)(?:\.[^.]*)?$")


def _unreported(
    stray: Sequence[str], messages: Sequence[TaskCommitMessage], job: JobContext
) -> list[str]:
    """Stray files whose names say a committed attempt wrote them: its commit left them out."""
    committed = set()
    for m in messages:
        attempt = parse_task_attempt_id(m.attempt_id)
        committed.add(_attempt_tag(job.job_uuid, attempt.task.index, attempt.number))
    found = []
    for f in stray:
        match = _TAG_RE.search(paths.name(f))
        if match and match.group(1) in committed:
            found.append(f)
    return found


class DirectCommitter(Committer):
    name = "direct"
    writes_in_place = True  # data is visible to plain readers during the job
    permanent_entries = ("_dataferry",)  # commit records stay with the table

    def __init__(self, store: Store, config: DirectConfig) -> None:
        super().__init__(store, config)
        self._announced: set[str] = set()  # marked ahead by announce_files, not yet written
        self._lock = threading.Lock()
        # what each attempt wrote through this committer: its task commit reports them even
        # when the caller passes no `written` list (a file no commit reports is deleted)
        self._written: dict[str, set[str]] = {}

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
        with self._lock:
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
        with self._lock:
            self._announced.update(finals)

    def _final(self, task: TaskAttemptContext, relpath: str) -> str:
        final = self.output_path(task, relpath)
        if paths.is_hidden(final):
            raise CommitError(f"task {task.attempt_id}: cannot write {relpath!r}: not a data path")
        return final

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        final = self.mark(task, relpath)
        self.store.write_bytes(final, data)
        self._record(task, final)
        return final

    def open_file(self, task: TaskAttemptContext, relpath: str) -> BinaryIO:
        final = self.mark(task, relpath)
        stream = self.store.open_write(final)
        self._record(task, final)
        return stream

    def _record(self, task: TaskAttemptContext, final: str) -> None:
        with self._lock:
            self._written.setdefault(str(task.attempt_id), set()).add(final)

    def _take_written(self, task: TaskAttemptContext) -> set[str]:
        with self._lock:
            return self._written.pop(str(task.attempt_id), set())

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return True

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        with self.stats.duration("task_stage_commit"):
            mine = self._take_written(task)
            files = tuple(sorted({paths.normalize(f) for f in written} | mine))
        return TaskCommitMessage(
            job_id=str(task.job.job_id),
            task_id=str(task.task_id),
            attempt_id=str(task.attempt_id),
            committer=self.name,
            files=files,
        )

    def abort_task(self, task: TaskAttemptContext) -> None:
        # its files are marked: job commit deletes them, or job abort does
        self._take_written(task)

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
            self._refuse_to_delete_unreported(job, stray, messages)
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

    def _refuse_to_delete_unreported(
        self, job: JobContext, stray: Sequence[str], messages: Sequence[TaskCommitMessage]
    ) -> None:
        """A committed attempt's file that its commit did not report would be deleted as a
        stray: that is a caller that committed without the written paths, and deleting would
        lose committed data. Refuse, before anything is deleted."""
        unreported = [f for f in _unreported(stray, messages, job) if self.store.exists(f)]
        if unreported:
            raise CommitError(
                f"job {job.job_id}: {len(unreported)} files written by committed task attempts "
                f"were not in their task commits, e.g. {self.store.full_url(unreported[0])}; "
                "nothing was deleted. Commit each task through the committer that wrote its "
                "files, or pass the written paths to commit_task"
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

