"""What the committers that publish by completing multipart uploads share (magic, and the
staging committers `directory` and `partitioned`).

Their tasks leave every file as an upload that is started and not completed, so nothing is
visible; a job commit decides which uploads are the job's, applies S3A's conflict mode
(`fail`, `append`, `replace`) over a scope of the destination, and completes them all in
parallel. Nothing is copied at job commit. The pieces here are the job commit's stages on
those uploads and the helpers that abort what an attempt left pending.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

import msgspec

from ...errors import (
    AmbiguousOutcome,
    CommitError,
    ConfigError,
    DestinationError,
    JobCommitError,
    NotFound,
)
from ...ids import new_job_id
from ...stages import stage
from ...store import Store, paths
from ...store.etags import multipart_etag
from ..base import Committer
from ..job.partitions import partitions_of
from ..job.recovery import recover_job
from ..job.vouch import OWN_DRIVER
from ..lookup import committer_by_name
from ..protocol import (
    Applied,
    CommitPlan,
    Count,
    JobContext,
    Leftover,
    NonEmpty,
    Plan,
    StageContext,
    TaskCommitMessage,
)
from ..records.intent import Intent, mark_phase, phase_done
from ..records.recordio import load_json_record, read_record

CONFLICT_MODES = ("fail", "append", "replace")
MIN_PART = 5 * 1024 * 1024  # S3's smallest part but the last (the committers' floor)
CONFLICT_RESOLVED_PHASE = "conflict_resolved"


def check_upload_config(config: Any, thread_fields: Sequence[str]) -> None:
    """The checks every upload committer's config makes (raises ConfigError naming the
    option): a known conflict mode, parts S3 accepts, at least one thread per pool."""
    if config.conflict_mode not in CONFLICT_MODES:
        raise ConfigError(
            f"unknown conflict_mode {config.conflict_mode!r}; use one of {', '.join(CONFLICT_MODES)}"
        )
    if config.part_size < MIN_PART:
        raise ConfigError(f"part_size must be at least {MIN_PART} bytes, got {config.part_size}")
    for name in thread_fields:
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be >= 1, got {getattr(config, name)}")


class Upload(msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """One pending upload as the intent record keeps it, the row `[path, upload id, [etag,
    ...], length]`: enough to complete it, or to know it was completed before (its object
    then has the etag the upload produces)."""

    path: NonEmpty
    upload_id: NonEmpty
    etags: Annotated[list[NonEmpty], msgspec.Meta(min_length=1)]
    length: Count

    def expected_etag(self) -> str:
        return multipart_etag(self.etags)


def refuse_duplicates(uploads: Iterable[Any], task_of: Any = None) -> None:
    """Two tasks of one job writing one key would make the output depend on completion order:
    refuse the commit, naming the key and both tasks."""
    seen: dict[str, Any] = {}
    for u in uploads:
        if u.path in seen:
            first = seen[u.path]
            raise JobCommitError(
                f"destination {u.path!r} is written by two tasks: "
                f"{getattr(first, 'task_id', '?')} and {getattr(u, 'task_id', '?')}"
            )
        seen[u.path] = u


# --- conflict modes ------------------------------------------------------------------------


def data_in(store: Store, scopes: Sequence[str] | None) -> list[str]:
    """Data files (no hidden path element) in the scopes: each partition's tree, the root's
    own files for `""`; `None` is the whole destination."""
    if scopes is None:
        return [s.path for s in store.walk("") if not paths.is_hidden(s.path)]
    found: list[str] = []
    for p in scopes:
        if p:
            found += [
                s.path for s in store.walk(p) if not paths.is_hidden(paths.relative_to(s.path, p))
            ]
        else:
            found += [
                e.path
                for e in store.list_or_empty("")
                if not e.is_dir and not paths.is_hidden(e.path)
            ]
    return found


@stage("job_stage_check_conflicts", "conflict")
def check_conflicts(
    ctx: StageContext, conflict_mode: str, scopes: Sequence[str] | None
) -> list[str]:
    """Conflict mode `fail` refuses data in the scopes the job writes; `replace` lists it to be
    deleted once the commit is decided; `append` leaves it (a file of the same name is
    replaced by the completed upload)."""
    if conflict_mode == "append":
        return []
    existing = data_in(ctx.store, scopes)
    if conflict_mode == "fail" and existing:
        where = "the destination" if scopes is None else "the partitions the job writes"
        raise DestinationError(
            f"conflict mode 'fail': {where} at {ctx.store.full_url()} already hold "
            f"{len(existing)} data files, e.g. {existing[0]!r}"
        )
    if conflict_mode == "replace":
        ctx.stats.incr("committer_conflict_files", len(existing))
        return existing
    return []


# --- loading and completing ------------------------------------------------------------------


def read_pendingset(
    store: Store, path: str, message: TaskCommitMessage, max_bytes: int
) -> tuple[bytes, str]:
    """A committed task's pendingset (at most `max_bytes`, else ValidationError naming it) and
    its URL; JobCommitError naming both if it is gone."""
    source = store.full_url(path)
    try:
        return read_record(store, path, max_bytes), source
    except NotFound:
        raise JobCommitError(
            f"task {message.task_id} committed by {message.attempt_id} has no pendingset {source}"
        ) from None


@stage("job_stage_load_pendingsets", "load_pendingsets")
def load_pendingsets(
    ctx: StageContext,
    committer: UploadCommitter,
    job: JobContext,
    messages: Sequence[TaskCommitMessage],
) -> list[Any]:
    """The chosen attempts' pending commits, in parallel; a key written by two tasks is
    refused."""
    commits = [
        c
        for batch in ctx.pool.map(lambda m: committer.pending_commits_of(job, m), messages)
        for c in batch
    ]
    refuse_duplicates(commits)
    ctx.stats.incr("committer_pendingsets_loaded", len(messages))
    return commits


@stage("job_stage_complete_uploads", "complete_uploads")
def complete_uploads(ctx: StageContext, uploads: list[Upload]) -> int:
    """Complete every upload in parallel. An upload no longer pending was completed before (a
    resumed commit, or a completion that timed out after taking effect): it counts as done when
    the object has the etag the upload produces. Returns how many were found done."""
    store = ctx.store
    pending = (
        {u.upload_id for u in store.list_uploads("")}
        if ctx.resumed and store.lists_uploads
        else None
    )  # one listing, not a request per upload already completed (GCS lists none: ask each)
    found = 0
    lock = threading.Lock()

    def finished(u: Upload) -> bool:
        return store.upload_completed(u.path, u.upload_id, u.etags)

    def complete(u: Upload) -> None:
        nonlocal found
        ctx.fence("completing uploads", strict=False)
        if pending is None or u.upload_id in pending:
            try:
                store.complete_upload(u.path, u.upload_id, u.etags)
                return
            except (NotFound, AmbiguousOutcome):
                pass
        if not finished(u):
            raise JobCommitError(
                f"upload {u.upload_id} of {store.full_url(u.path)} is neither pending nor "
                "completed; the job's directory is left in place"
            )
        with lock:
            found += 1

    ctx.pool.for_each(complete, uploads)
    return found


class UploadsPlan(Plan, kw_only=True):
    """An upload committer's plan: the uploads to complete, the task attempts they are of
    (whose records cleanup keeps apart), and the files the conflict mode replaces."""

    uploads: list[Upload]
    attempts: list[str]
    replace_files: list[str]


def apply_uploads(ctx: StageContext, job_dir: str, plan: UploadsPlan) -> Applied:
    """The apply half of an upload committer's job commit, from its plan alone (every row
    checked as the record was read, before anything is deleted or completed): delete what the
    conflict mode replaces (once, before any upload completes, so a resumed commit never
    deletes new files), then complete."""
    uploads, replace_files = plan.uploads, plan.replace_files
    if not phase_done(ctx.store, job_dir, CONFLICT_RESOLVED_PHASE):
        ctx.pool.for_each(ctx.store.delete, replace_files, adaptive=True)
        mark_phase(ctx.store, job_dir, CONFLICT_RESOLVED_PHASE)
    recovered = complete_uploads(ctx, uploads)
    return Applied(
        files=len(uploads),
        bytes=sum(u.length for u in uploads),
        filenames=sorted(u.path for u in uploads)[:100],
        details={
            "uploads_completed": len(uploads),
            "uploads_recovered": recovered,
            "replaced_objects": len(replace_files),
        },
    )


# --- aborting --------------------------------------------------------------------------------


def abort_quietly(store: Store, uploads: Iterable[tuple[str, str]]) -> int:
    """Abort (path, upload id) pairs; one already gone (completed or aborted) is no error.
    Returns how many were pending."""
    aborted = 0
    for path, upload_id in uploads:
        try:
            if store.abort_upload(path, upload_id):
                aborted += 1
        except NotFound:
            pass
    return aborted


def abort_at_keys(store: Store, keys: Iterable[str]) -> int:
    """Abort every upload pending at these keys: for an attempt that died between starting an
    upload and recording its id. Only for keys no live attempt of the job may still write."""
    aborted = 0
    by_parent: dict[str, set[str]] = {}
    for k in keys:
        by_parent.setdefault(paths.parent(k), set()).add(k)
    for parent, wanted in by_parent.items():
        for u in store.list_uploads(parent):
            if u.path in wanted:
                aborted += abort_quietly(store, [(u.path, u.upload_id)])
    return aborted


def read_json(store: Store, path: str, max_bytes: int) -> Any:
    """A JSON record on the store, at most `max_bytes` long; ValidationError naming it if it is
    larger, a directory, or does not parse; NotFound if it is absent."""
    return load_json_record(store, path, max_bytes)[0]


def dumps(data: Any) -> bytes:
    return json.dumps(data, indent=1).encode()


# --- the committer base ----------------------------------------------------------------------


class UploadCommitter(Committer):
    """A committer whose tasks leave pending uploads and whose job commit completes them.
    Its jobs keep their records under `<job_prefix><jobUUID>/<attempt>/` in the destination."""

    job_prefix = ""
    starts_uploads = True
    plan_type = UploadsPlan

    def require_multipart(self) -> None:
        if not self.store.capabilities.multipart_upload:
            raise CommitError(
                f"the {self.name} committer needs multipart upload, which "
                f"{self.store.describe()} lacks"
            )

    def jobs_dir(self, job: JobContext) -> str:
        """Every attempt of the job keeps its records below this directory."""
        return f"{self.job_prefix}{job.job_uuid}"

    def job_dir(self, job: JobContext) -> str:
        return f"{self.jobs_dir(job)}/{job.attempt:02d}"

    def pending_commits_of(self, job: JobContext, message: TaskCommitMessage) -> list[Any]:
        """The pending commits (PendingCommit) of the attempt a commit message names."""
        raise NotImplementedError

    def conflict_scopes(self, files: Sequence[str]) -> list[str] | None:
        """What the conflict mode looks at (None: the whole destination); by default each
        directory the job writes files into."""
        return partitions_of(files)

    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        self.require_multipart()
        commits = load_pendingsets(ctx, self, job, messages)
        doomed = check_conflicts(
            ctx, self.config.conflict_mode, self.conflict_scopes([c.path for c in commits])
        )
        plan = UploadsPlan(
            uploads=[Upload(c.path, c.upload_id, list(c.etags), c.length) for c in commits],
            attempts=sorted(m.attempt_id for m in messages),
            replace_files=doomed,
        )
        return CommitPlan(plan, len(commits), sum(c.length for c in commits))

    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        return apply_uploads(ctx, self.job_dir(job), intent.payload)  # an UploadsPlan

    def cleanup_job(self, job: JobContext) -> None:
        """Remove what the job left. Deleting its records alone would leave its uploads pending
        and unnamed, so a job that never decided its commit is rolled back (every upload
        aborted) and one that decided is finished first."""
        recover_job(self, job, vouched=OWN_DRIVER)  # the job's own driver asks
        self.store.delete(self.jobs_dir(job), recursive=True)

    @classmethod
    def recorded_uploads(cls, store: Store) -> list[Any]:
        """Uploads its jobs' records name, for stores that cannot list them (GCS)."""
        return []

    @classmethod
    def serves(cls, store: Store) -> bool:
        """Whether its jobs' directories on `store` are its own (`magic` on S3's multipart
        uploads, `magic-gcs` on GCS's sessions share a layout)."""
        return store.capabilities.multipart_upload

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        if not cls.serves(store) or not store.exists(""):
            return []
        found = []
        for e in store.list(""):
            if e.is_dir and e.name.startswith(cls.job_prefix):
                uuid = e.name[len(cls.job_prefix) :]
                attempts = [a for a in store.list(e.path) if a.is_dir and a.name.isdigit()]
                found += [Leftover(e.path, cls.name, uuid, int(a.name)) for a in attempts] or [
                    Leftover(e.path, cls.name, uuid, 0)
                ]
        return found

    @classmethod
    def recover_leftover(cls, store: Store, leftover: Leftover, rollback: bool = False) -> str:
        committer = committer_by_name(leftover.committer, store)
        job = committer.new_job(new_job_id(job_uuid=leftover.job_uuid), attempt=leftover.attempt)
        outcome = recover_job(committer, job, rollback=rollback)
        if store.exists(leftover.path) and not store.list(leftover.path):
            store.delete(leftover.path, recursive=True)
        return outcome
