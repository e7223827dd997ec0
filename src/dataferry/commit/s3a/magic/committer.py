"""The magic committer: zero-rename commit on stores with multipart upload (S3).

A task attempt writes each file as a multipart upload to its final key and does not complete
it: nothing is visible. Before it starts an upload it writes a zero-byte marker at the file's
magic path (so an attempt that dies before recording the upload still names the key to clean),
and after the last part a `.pending` record. Task commit gathers the attempt's `.pending` records
into one `<taskId>.pendingset` (the last attempt to commit wins), saves the same as the
attempt's own `_attempt.pendingset` (what still names its uploads if a later attempt overwrites
the task's) and deletes the markers and `.pending` records, as S3A's task commit does. Job
commit loads the committed tasks' pendingsets, applies the conflict mode, completes every
upload in parallel, writes `_SUCCESS` and deletes the magic directory. No byte is copied at
commit time.

Layout, S3A's own (Hadoop 3.4+, HADOOP-18797: per-job magic directories, so concurrent jobs
never touch each other's records), so that Hadoop's job commit finds dataferry's pendingsets and
dataferry's finds Hadoop's: the job attempt directory is
`$dest/__magic_job-<jobUUID>/job-<jobUUID>/<NN>/`, holding `<taskId>.pendingset` per committed
task and `tasks/<taskAttemptId>/__base/<path>[.pending]` (markers and `.pending` records; S3A's
`__base` maps what follows it onto the destination).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from typing import Any, BinaryIO

from ....errors import CommitError, InjectedCrash, NotFound, TaskCommitError, ValidationError
from ....store import IOPool, Store, paths
from ...job.stages import check_destination
from ...protocol import (
    JobContext,
    Leftover,
    StageContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from ...records.intent import load_intent
from ..uploads import UploadCommitter, abort_at_keys, dumps, read_pendingset
from .config import MagicConfig
from .files import (
    PENDINGSET_MAX_BYTES,
    PendingCommit,
    PendingSet,
    read_pending,
    read_pendingset_file,
)

MAGIC_PREFIX = "__magic_job-"
JOB_ID_PREFIX = "job-"  # S3A's `job-<jobUUID>` level inside the magic directory
BASE = "__base"  # S3A: the path below it is the destination-relative path
PENDING_SUFFIX = ".pending"
PENDINGSET_SUFFIX = ".pendingset"
ATTEMPT_CLAIM = "_attempt"
OWN_PENDINGSET = "_attempt.pendingset"  # an attempt's own copy of what its task commit saved
COMMITTER_NAME = "dataferry.commit.magic.MagicCommitter"

log = logging.getLogger("dataferry.commit")


def job_dir(job: JobContext) -> str:
    return f"{MAGIC_PREFIX}{job.job_uuid}"


def job_attempt_dir(job: JobContext) -> str:
    return f"{job_dir(job)}/{JOB_ID_PREFIX}{job.job_uuid}/{job.attempt:02d}"


def attempt_dir(task: TaskAttemptContext) -> str:
    return f"{job_attempt_dir(task.job)}/tasks/{task.attempt_id}"


def base_dir(attempt: str) -> str:
    """Where an attempt's markers and `.pending` records mirror the destination's paths."""
    return f"{attempt}/{BASE}"


def pendingset_path(job: JobContext, task_id: str) -> str:
    return f"{job_attempt_dir(job)}/{task_id}{PENDINGSET_SUFFIX}"


class MagicCommitter(UploadCommitter):
    name = "magic"
    job_prefix = MAGIC_PREFIX

    def __init__(self, store: Store, config: MagicConfig) -> None:
        super().__init__(store, config)

    def job_dir(self, job: JobContext) -> str:
        return job_attempt_dir(job)

    # --- job and task setup ----------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        self.require_multipart()
        check_destination(self.store)
        with self.stats.duration("job_stage_setup"):
            if self.store.exists(job_attempt_dir(job)):
                raise CommitError(
                    f"magic directory {self.store.full_url(job_attempt_dir(job))} exists: job id reused?"
                )

    def setup_task(self, task: TaskAttemptContext) -> None:
        """Claim the attempt id: an engine that reruns a task with the same id (Dask after a
        worker died) is refused, so no earlier run's uploads can lose their records."""
        if not self.store.create_if_absent(f"{attempt_dir(task)}/{ATTEMPT_CLAIM}", b""):
            raise CommitError(
                f"task attempt {task.attempt_id} was already set up; not running it twice"
            )

    def task_work_path(self, task: TaskAttemptContext) -> str:
        return attempt_dir(task)

    # --- writing: multipart uploads to the final key ---------------------------------------

    def open_file(self, task: TaskAttemptContext, relpath: str) -> BinaryIO:
        rel = paths.normalize(relpath)
        if not rel or paths.is_hidden(rel):
            raise CommitError(f"task {task.attempt_id}: cannot write {relpath!r}: not a data path")
        return self.stream(task, rel)  # type: ignore[return-value]

    def stream(self, task: TaskAttemptContext, relpath: str) -> _UploadStream:
        """The stream a file is written through (an upload left pending on close)."""
        return _UploadStream(self, task, relpath)

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        with self.open_file(task, relpath) as f:
            f.write(data)
        return paths.normalize(relpath)

    # --- task commit -----------------------------------------------------------------------

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return True

    def _attempt_records(self, task: TaskAttemptContext) -> tuple[list[str], list[str]]:
        """(.pending paths, marker paths) of an attempt."""
        base = attempt_dir(task)
        pending, markers = [], []
        for st in self.store.walk(base):
            (pending if st.path.endswith(PENDING_SUFFIX) else markers).append(st.path)
        return pending, markers

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        with self.stats.duration("task_stage_commit"):
            target = pendingset_path(task.job, str(task.task_id))
            self._refuse_second_commit(task, target)
            pending, _markers = self._attempt_records(task)
            commits = []
            try:
                for p in pending:
                    commits.append(read_pending(self.store, p))
            except ValidationError:
                self._abort_commits(commits)
                raise
            pset = PendingSet(task.job.job_uuid, str(task.attempt_id), commits)
            raw = pset.to_bytes(self.store)
            # the attempt's own copy first: if a later attempt overwrites the task's pendingset
            # (the last writer wins its name), it still names this attempt's uploads
            self.store.write_bytes(f"{attempt_dir(task)}/{OWN_PENDINGSET}", raw)
            self.store.write_bytes(target, raw)
            # the markers and `.pending` records, now named by both, go now (as S3A's task
            # commit does) rather than all at once in job commit: deleting 2,000 of them took
            # as long as completing 1,000 uploads on SeaweedFS (GCS's sessions, which cannot
            # be listed, are named by the pendingsets from here on)
            self.store.delete(base_dir(attempt_dir(task)), recursive=True)
        return TaskCommitMessage(
            job_id=str(task.job.job_id),
            task_id=str(task.task_id),
            attempt_id=str(task.attempt_id),
            committer=self.name,
            files=tuple(c.path for c in commits),
            bytes=sum(c.length for c in commits),
            extra={"pendingset": target},
        )

    def _refuse_second_commit(self, task: TaskAttemptContext, target: str) -> None:
        try:
            saved = read_pendingset_file(self.store, target)
        except NotFound:
            return
        if saved.task_attempt_id == str(task.attempt_id):
            raise TaskCommitError(f"task attempt {task.attempt_id} is already committed ({target})")

    def abort_task(self, task: TaskAttemptContext) -> None:
        with self.stats.duration("task_stage_abort_task"):
            self._abort_attempt_dir(attempt_dir(task))

    def _abort_attempt_dir(self, base: str) -> None:
        """Abort every upload an attempt started: those its own pendingset copy or a `.pending`
        names by upload id, those that died before recording one through their marker's key."""
        data = base_dir(base)
        recorded: set[str] = set()
        try:
            own = self._own_commits(base)
        except ValidationError as e:
            log.warning("%s; aborting through the attempt's other records", e)
            own = []
        for c in own:
            self.store.abort_upload(c.path, c.upload_id)
            recorded.add(paths.normalize(c.path))
        for st in self.store.walk(base):
            if st.path.endswith(PENDING_SUFFIX):
                try:
                    c = read_pending(self.store, st.path)
                except ValidationError as e:
                    # its upload is aborted by key below, through the file's marker
                    log.warning("%s; aborting the uploads at its key instead", e)
                    continue
                self.store.abort_upload(c.path, c.upload_id)
                recorded.add(paths.relative_to(st.path[: -len(PENDING_SUFFIX)], data))
        for st in self.store.walk(data) if self.store.exists(data) else []:
            if st.path.endswith(PENDING_SUFFIX):
                continue
            rel = paths.relative_to(st.path, data)
            if rel not in recorded:
                abort_at_keys(self.store, [rel])
        self.store.delete(base, recursive=True)

    def _abort_commits(self, commits: list[PendingCommit]) -> None:
        for c in commits:
            try:
                self.store.abort_upload(c.path, c.upload_id)
            except Exception:
                pass

    # --- job commit ------------------------------------------------------------------------

    def pending_commits_of(self, job: JobContext, m: TaskCommitMessage) -> list[PendingCommit]:
        raw, source = read_pendingset(
            self.store, pendingset_path(job, m.task_id), m, PENDINGSET_MAX_BYTES
        )
        pset = PendingSet.from_bytes(raw, self.store, source)
        if pset.attempt() not in ("", m.attempt_id):
            # an attempt the driver gave up on committed after the chosen one (the last writer
            # wins the pendingset's name): the chosen attempt's own copy, or its .pending
            # records if it died before deleting them, are still in its directory
            self.stats.incr("committer_pendingsets_rebuilt")
            base = f"{job_attempt_dir(job)}/tasks/{m.attempt_id}"
            return self._own_commits(base) or self._pending_of(base)
        return pset.commits

    def _own_commits(self, base: str) -> list[PendingCommit]:
        """The commits of an attempt's own pendingset copy ([] if it saved none)."""
        try:
            return read_pendingset_file(self.store, f"{base}/{OWN_PENDINGSET}").commits
        except NotFound:
            return []

    def _pending_of(self, base: str) -> list[PendingCommit]:
        """The `.pending` records an attempt left in its directory."""
        return [
            read_pending(self.store, st.path)
            for st in self.store.walk(base)
            if st.path.endswith(PENDING_SUFFIX)
        ]

    # --- job commit (on the shared stages of job/commit.py) ------------------------------------

    def success_committer_name(self) -> str:
        return COMMITTER_NAME

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        intent = load_intent(self.store, self.job_dir(job), self.plan_type)
        committed = frozenset(intent.payload.attempts) if intent else frozenset()
        self._abort_uncommitted_attempts(job, ctx.pool, committed)
        self.store.delete(job_dir(job), recursive=True)
        return "deleted"

    def _abort_uncommitted_attempts(
        self, job: JobContext, pool: IOPool, committed: frozenset[str] = frozenset()
    ) -> None:
        """Attempts that died, were denied, or were superseded left uploads pending: abort
        every attempt's uploads except those of the attempts whose uploads were completed."""
        tasks = f"{job_attempt_dir(job)}/tasks"
        if self.store.exists(tasks):
            doomed = [st.path for st in self.store.list(tasks) if st.name not in committed]
            pool.for_each(self._abort_attempt_dir, doomed)

    # --- abort and cleanup -----------------------------------------------------------------

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        """Each job attempt directory `__magic_job-<uuid>/job-<uuid>/<NN>` (a job of either
        dataferry or Hadoop); a magic directory with none is attempt 0's."""
        if not cls.serves(store):
            return []  # `magic` on S3's multipart uploads, `magic-gcs` on GCS's sessions
        found = []
        for e in store.list_or_empty(""):
            if not (e.is_dir and e.name.startswith(MAGIC_PREFIX)):
                continue
            uuid = e.name[len(MAGIC_PREFIX) :]
            inner = f"{e.path}/{JOB_ID_PREFIX}{uuid}"
            attempts = [a for a in store.list_or_empty(inner) if a.is_dir and a.name.isdigit()]
            found += [Leftover(e.path, cls.name, uuid, int(a.name)) for a in attempts] or [
                Leftover(e.path, cls.name, uuid, 0)
            ]
        return found

    def rollback_job(self, job: JobContext) -> None:
        """Abort every upload of the job (nothing left to bill) and remove the magic directory.
        Without an intent record no upload was completed, so nothing visible is left."""
        base = job_attempt_dir(job)
        for st in self.store.list(f"{base}/tasks") if self.store.exists(f"{base}/tasks") else []:
            self._abort_attempt_dir(st.path)
        for st in self.store.walk(base):
            if not st.path.endswith(PENDINGSET_SUFFIX):
                continue
            try:
                pset = read_pendingset_file(self.store, st.path)
            except ValidationError as e:
                # no upload of the job was completed (it has no intent record), and each
                # attempt's own `.pending` records and markers were aborted above
                log.warning("%s; rolling back without it", e)
                continue
            for c in pset.commits:
                self.store.abort_upload(c.path, c.upload_id)
        self.store.delete(job_dir(job), recursive=True)


class _UploadStream(io.RawIOBase):
    """Writes one file as a multipart upload that is left pending: parts go up as they fill;
    on close the last part is sent and the `.pending` record saved."""

    def __init__(self, committer: MagicCommitter, task: TaskAttemptContext, relpath: str) -> None:
        super().__init__()
        self.c, self.task, self.path = committer, task, relpath
        self.store = committer.store
        self.buffer = bytearray()
        self.etags: list[str] = []
        self.upload_id: str | None = None
        self.length = 0
        self.failed = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.buffer += chunk
        self.length += len(chunk)
        size = self.c.config.part_size
        while len(self.buffer) >= 2 * size:  # keep a full part back: the last part may be small
            self._part(bytes(self.buffer[:size]))
            del self.buffer[:size]
        return len(chunk)

    def _start(self) -> str:
        if self.upload_id is None:
            base = base_dir(attempt_dir(self.task))
            self.store.write_bytes(f"{base}/{self.path}", b"")  # the marker: names the key
            self.upload_id = self.store.initiate_upload(self.path)
        return self.upload_id

    def _part(self, data: bytes) -> None:
        upload = self._start()
        self.etags.append(self.store.upload_part(self.path, upload, len(self.etags) + 1, data))

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self.failed:
                self._part(bytes(self.buffer))
                pending = PendingCommit(
                    self.path,
                    self.upload_id or "",
                    self.etags,
                    self.length,
                    self.task.job.job_uuid,
                    str(self.task.task_id),
                )
                base = base_dir(attempt_dir(self.task))
                self.store.write_bytes(
                    f"{base}/{self.path}{PENDING_SUFFIX}", dumps(pending.to_json(self.store))
                )
        finally:
            super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.failed = True
            # a dying process aborts nothing; an ordinary failure aborts its own upload
            if self.upload_id and not issubclass(exc_type, InjectedCrash):
                try:
                    self.store.abort_upload(self.path, self.upload_id)
                except Exception:
                    pass
        self.close()
