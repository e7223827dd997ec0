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

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from ...errors import CommitError, NotFound
from ...ids import parse_task_attempt_id
from ...markers import DirectMarkers, MarkerClient, ServiceMarkers, WriteMarkers
from ...markers.base import MARKERS_ROOT, BadMarker, data_path
from ...markers.listing import markers_in
from ...markers.ownership import attempt_tag, attempt_tag_of, owned_by_marker_dir
from ...net.addresses import parse_service_url
from ...net.tls import normalize_fingerprint
from ...stages import stage
from ...store import IOPool, Store, open_store, paths
from ..base import Committer
from ..job.stages import check_destination
from ..protocol import (
    Applied,
    CommitPlan,
    JobContext,
    Leftover,
    StageContext,
    TaskAttemptContext,
    TaskCommitMessage,
    plan_type_of,
)
from ..records.intent import Intent, load_intent
from ..records.success import SUCCESS_FILE
from .deletion import (
    delete_seen_markers,
    delete_stray_files,
    delete_uncommitted,
    delete_untracked,
    owned_files,
)
from .plan import DirectPlan, plan_files
from .records import CommitRecord, read_commit_record

log = logging.getLogger("dataferry.commit")

COMMITS_DIR = "_dataferry/commits"
COMMITTER_NAME = "dataferry.commit.direct.DirectCommitter"


@dataclass(frozen=True)
class DirectConfig:
    """
    markers: `direct` (one marker file each) or `service` (the batching marker service;
        `hoodie.write.markers.type` TIMELINE_SERVER_BASED).
    service_url, service_token: where the marker service listens, and its shared secret (never
        shown by repr()).
    service_fingerprint: the SHA-256 fingerprint of the service's TLS certificate, for an
        `https://` service_url ("" for a plain service on loopback).
    threads: `hoodie.finalize.write.parallelism` and `hoodie.markers.delete.parallelism`: deletes
        of stray files and listing of markers in parallel.
    mark_successful_jobs: write `_SUCCESS`.
    success_data: write Hadoop's SuccessData JSON into `_SUCCESS`, as Hadoop's manifest and S3A
        committers do (False: the classic zero-byte `_SUCCESS`, which every directory reader
        accepts; polars refuses a directory holding a non-empty one).
    """

    markers: str = "direct"
    service_url: str = ""
    service_token: str = field(default="", repr=False)
    service_fingerprint: str = ""
    threads: int = 32
    mark_successful_jobs: bool = True
    success_data: bool = False

    def __post_init__(self) -> None:
        from ...errors import ConfigError

        if self.markers not in ("direct", "service"):
            raise ConfigError(f"markers must be 'direct' or 'service', got {self.markers!r}")
        fingerprint = normalize_fingerprint(self.service_fingerprint, "service_fingerprint")
        object.__setattr__(self, "service_fingerprint", fingerprint)  # one spelling
        if self.markers == "service" and not self.service_url:
            raise ConfigError("markers='service' needs service_url")
        if self.markers == "service":
            # on the driver, when the committer is built: what every task's client would
            # refuse (a wrong URL, https without a fingerprint) fails here, once
            parse_service_url(
                self.service_url,
                fingerprint=fingerprint,
                what="marker service",
                fingerprint_option="service_fingerprint",
            )

    def services_tasks_reach(self) -> list[tuple[str, str]]:
        """The network services this committer's tasks must reach, as (address, what) pairs:
        the engines check them from the workers' hosts before the job starts."""
        if self.markers == "service" and self.service_url:
            return [(self.service_url, "marker service")]
        return []


def commit_record_path(job_uuid: str) -> str:
    return f"{COMMITS_DIR}/{job_uuid}.json"


def unique_name(relpath: str, task: TaskAttemptContext) -> str:
    """`dir/name.ext` -> `dir/name-<job8>-t<task>-a<attempt>.ext`: no two attempts collide."""
    rel = paths.normalize(relpath)
    parent, name = paths.parent(rel), paths.name(rel)
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    tag = attempt_tag(task.job.job_uuid, task.task_index, task.attempt_number)
    return paths.join(parent, f"{stem}{tag}{'.' + ext if ext else ''}")


def _unreported(
    stray: Sequence[str], messages: Sequence[TaskCommitMessage], job: JobContext
) -> list[str]:
    """Stray files whose names say a committed attempt wrote them: its commit left them out."""
    committed = set()
    for m in messages:
        attempt = parse_task_attempt_id(m.attempt_id)
        committed.add(attempt_tag(job.job_uuid, attempt.task.index, attempt.number))
    return [f for f in stray if attempt_tag_of(paths.name(f)) in committed]


class DirectCommitter(Committer):
    name = "direct"
    writes_in_place = True  # data is visible to plain readers during the job
    permanent_entries = ("_dataferry",)  # commit records stay with the table
    # where each job's marker directory lives (`<root>/<job uuid>`): one root per committer,
    # so that `dataferry cleanup` knows whose job a marker directory is
    markers_root = MARKERS_ROOT
    plan_type = DirectPlan
    # the markers an attempt announces as one batch file (`DirectMarkers`, `batch`), not a
    # file each (in a directory each per partition)
    batch_markers = False

    def __init__(self, store: Store, config: DirectConfig) -> None:
        super().__init__(store, config)
        self._announced: set[str] = set()  # marked ahead by announce_files, not yet written
        self._lock = threading.Lock()
        # what each attempt wrote through this committer: its task commit reports them even
        # when the caller passes no `written` list (a file no commit reports is deleted)
        self._written: dict[str, set[str]] = {}

    def __getstate__(self) -> dict:
        # a Dask cluster pickles the driver's committer into its setup and commit tasks: the
        # lock guards only this process's threads, and the copy gets a fresh one
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def markers(self, job: JobContext) -> WriteMarkers:
        directory = self.job_dir(job)
        if self.config.markers == "service":
            client = MarkerClient(
                self.config.service_url,
                self.config.service_token,
                fingerprint=self.config.service_fingerprint,
            )
            return ServiceMarkers(client, self.store, directory)
        return DirectMarkers(self.store, directory, self.config.threads, self.batch_markers)

    # --- job and task ----------------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        check_destination(self.store)
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
        service, or one batch file (`batch_markers`). Other direct markers stay one per file,
        made as each file is opened: made all at once they would only meet the store's
        request ceiling in a burst."""
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

    # --- job commit: reconcile against the markers (stages of job/commit.py) -----------------

    def job_dir(self, job: JobContext) -> str:
        """The job's marker directory (its intent record lives there too)."""
        return paths.join(self.markers_root, job.job_uuid)

    def committed_files(self, job: JobContext) -> list[str]:
        """The files a committed job published (its commit record's list; none if it has
        none): what a rollback and the last look for late files keep."""
        return _record_files(self.store, job.job_uuid)

    def referenced_anywhere(self) -> set[str]:
        """Every data file some committed version of the destination references (here: every
        commit record's list): what no deletion may touch, whatever a marker or a name says."""
        return _all_record_files(self.store)

    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        marked = list_markers(ctx, self.markers(job))
        committed = {f for m in messages for f in m.files}
        unmarked = committed - marked
        if unmarked:
            raise CommitError(
                f"job {job.job_id}: {len(unmarked)} reported files have no marker, e.g. {sorted(unmarked)[0]}"
            )
        stray = owned_files(self, self.job_dir(job), sorted(marked - committed))
        self._refuse_to_delete_unreported(job, stray, messages)
        plan = DirectPlan(files=sorted(committed), stray=stray, marked=len(marked))
        return CommitPlan(plan, len(committed))

    def existing_data(self, job: JobContext, plan: CommitPlan) -> list[str]:
        """Committed jobs' records and files, `_SUCCESS`, and any other visible file: not the
        files of jobs in flight (this one's or another's), which are in place but not data
        until their job commits."""

        records = [
            r.path
            for r in self.store.list_or_empty(COMMITS_DIR)
            if r.path != commit_record_path(job.job_uuid)
        ]
        # markers between two walks: a marker is made before its file, so every in-flight
        # file the first walk saw has its marker by then; and a file the second walk no longer
        # sees was another job's, rolled back meanwhile
        before = {s.path for s in self.store.walk("") if not paths.is_hidden(s.path)}
        in_flight = {
            f
            for d in self.store.list_or_empty(MARKERS_ROOT)
            for f in map(data_path, markers_in(self.store, d.path))
            if owned_by_marker_dir(d.path, f)  # a forged marker hides nothing from overwrite
        }
        after = {s.path for s in self.store.walk("") if not paths.is_hidden(s.path)}
        files = [f for f in before & after if f not in in_flight]
        success = [SUCCESS_FILE] if self.store.exists(SUCCESS_FILE) else []
        return sorted(files) + records + success

    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        plan: DirectPlan = intent.payload
        delete_stray_files(ctx, self, job, plan.stray)
        save_commit_record(ctx, job, plan.files)
        return Applied(
            files=len(plan.files),
            filenames=plan.files[:100],
            details={"stray_files_deleted": len(plan.stray), "markers_found": plan.marked},
        )

    def success_committer_name(self) -> str:
        return COMMITTER_NAME

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        """Delete the markers, with a look before and after: a file marked since the plan (an
        attempt the driver gave up on, still writing) is not committed and goes first. Direct
        markers are deleted as that look saw them (`delete_seen_markers`): one made since
        stays for `dataferry cleanup`. Otherwise (the service's) they go at once, and a file
        whose marker went with the others is found by its job's tag in the partitions the job
        wrote; a later one re-creates a marker, which `dataferry cleanup` finds."""
        intent = load_intent(ctx.store, self.job_dir(job), plan_type_of(self))
        committed = plan_files(intent.payload) if intent else self.committed_files(job)
        if self.config.markers == "direct" and delete_seen_markers(
            self, self.job_dir(job), job.job_uuid, committed, ctx.pool
        ):
            type(self).tidy(ctx.store)
            return "deleted"
        delete_uncommitted(self, self.job_dir(job), committed, ctx.pool)
        self.markers(job).delete_all()
        delete_untracked(self, job.job_uuid, committed, ctx.pool)
        type(self).tidy(ctx.store)
        return "deleted"

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

    def rollback_job(self, job: JobContext) -> None:
        """Delete every file the job's markers name (read from the store: works with the
        service down), the directories it made that are now empty, then the markers."""
        committed = self.committed_files(job)
        with IOPool(self.config.threads) as pool:
            doomed = delete_uncommitted(self, self.job_dir(job), committed, pool)
            self.store.delete(self.job_dir(job), recursive=True)
            delete_untracked(self, job.job_uuid, committed, pool, also=doomed)
        type(self).tidy(self.store)

    def cleanup_job(self, job: JobContext) -> None:
        self.markers(job).delete_all()

    @classmethod
    def tidy(cls, store: Store) -> None:
        store.delete_if_empty(cls.markers_root)

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        return [
            Leftover(e.path, cls.name, e.name)
            for e in store.list_or_empty(cls.markers_root)
            if e.is_dir
        ]


def _record_files(store: Store, job_uuid: str) -> list[str]:
    try:
        return read_commit_record(store, commit_record_path(job_uuid), job_uuid).files
    except NotFound:
        return []


def _all_record_files(store: Store) -> set[str]:
    files: set[str] = set()
    for r in store.list_or_empty(COMMITS_DIR):
        if r.name.endswith(".json"):
            files.update(read_commit_record(store, r.path, r.name[: -len(".json")]).files)
    return files


@stage("job_stage_list_markers", "list_markers")
def list_markers(ctx: StageContext, markers: WriteMarkers) -> set[str]:
    try:
        return markers.data_paths()
    except BadMarker as e:
        raise CommitError(
            f"marker directory {markers.directory} holds a file no writer makes ({e}): "
            "remove it, or roll the job back"
        ) from None


@stage("job_stage_save_records", "save_records")
def save_commit_record(ctx: StageContext, job: JobContext, files: list[str]) -> None:
    """The switch readers of committed files see: one write of the complete file list."""
    record = CommitRecord(job.job_uuid, str(job.job_id), time.time(), list(files))
    ctx.store.write_bytes(commit_record_path(job.job_uuid), record.to_bytes())


def list_committed(dest: str | Store) -> list[str]:
    """Files of committed jobs only (for readers that must not see files in flight)."""
    store = dest if isinstance(dest, Store) else open_store(dest)
    return sorted(f for f in _all_record_files(store) if store.exists(f))
