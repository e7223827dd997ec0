"""The manifest committer: v1's safety with a parallel job commit.

Task commit writes a manifest listing the attempt's files (they stay where they are); job commit
loads the committed tasks' manifests, creates the leaf directories and renames every file in
parallel, then writes a JSON `_SUCCESS`. Made for stores with atomic O(1) file rename but slow or
non-atomic directory operations (ABFS, GCS with care, HDFS under load); not for S3, which has no
rename at all (use the magic committer there).

Stages (each in `stages/`, each timed into the committer's statistics), inside the job commit
that every committer shares (`commit/job/commit.py`: claim, intent record, recovery):
    setup_job -> [tasks: setup_task, scan_task_attempt, save_task_manifest]
    -> claim -> load_manifests (entries saved in the job directory) -> check_existing_files
    -> save_intent -> create_directories -> rename_files -> [validate_output]
    -> save_success -> cleanup
Where the store's closes are slow (HDFS), load_manifests runs beside the claim
(`prepare_commit`), its entries file closing beside the intent written ahead (`job/ahead.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ...errors import NotFound, TaskCommitError
from ...stats import IOStatistics
from ...store import Store, open_store, paths
from ..base import Committer
from ..job.stages import check_destination
from ..protocol import (
    REPLACING_MODES,
    Applied,
    CommitPlan,
    Count,
    JobContext,
    Leftover,
    NonEmpty,
    Plan,
    StageContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from ..records.intent import Intent
from ..records.success import SuccessData
from .carried import CARRIED, carried_by, carry
from .config import ManifestConfig
from .files import DirEntry, EntryStatus, TaskManifest, read_manifest
from .layout import PENDING_DIR, JobLayout
from .stages.cleanup import CleanupOutcome, cleanup
from .stages.create_dirs import create_directories
from .stages.load import LoadedManifests, check_existing_files, load_manifests
from .stages.rename import rename_files
from .stages.save_manifest import save_task_manifest
from .stages.scan import scan_task_attempt
from .stages.setup import setup_job, setup_task
from .stages.validate import validate_output

COMMITTER_NAME = "dataferry.commit.manifest.ManifestCommitter"
ENTRIES_NAME = "_commit_entries.jsonl"


class PlannedDir(msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """A directory the commit creates: the row `[dest, entry status, level]`."""

    dest: NonEmpty
    status: int
    level: Count


class ManifestPlan(Plan, kw_only=True):
    """The manifest committer's plan: where the loaded manifests' entries are (and the entries
    file's size when written: None in records of older versions), their totals, the
    directories to create and the files the write mode deletes before any rename."""

    entries: NonEmpty
    entries_bytes: Count | None = None
    manifests: Count
    files: Count
    bytes: Count
    task_attempts: dict[str, Count]  # task attempt id -> its files
    directories: list[PlannedDir]
    replace_files: list[str]


class ManifestCommitter(Committer):
    name = "manifest"
    inflight_names = True
    flat_attempts = True  # one directory per attempt, whatever the partitions (scan unflattens)
    sweeps_late_attempts = True
    plan_type = ManifestPlan

    def __init__(self, store: Store, config: ManifestConfig) -> None:
        super().__init__(store, config)
        self._prepared: dict[str, LoadedManifests] = {}  # job uuid -> loaded before the claim
        # job uuid -> the entries file's lines as this process wrote them (its plan's own)
        self._kept: dict[str, list[bytes]] = {}
        # job uuid -> the job's directories its plan found existing (none need creating)
        self._seen: dict[str, set[str]] = {}

    def layout_of(self, job: JobContext) -> JobLayout:
        return JobLayout.of(job)

    # --- job setup -------------------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        check_destination(self.store)
        setup_job(self.stage_context(job, 1))

    # --- task side -------------------------------------------------------------------------

    def task_work_path(self, task: TaskAttemptContext) -> str:
        return JobLayout.of(task.job).task_attempt_dir(task)

    def setup_task(self, task: TaskAttemptContext) -> None:
        setup_task(self.stage_context(task.job, 1), self.task_work_path(task))

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return True  # as Hadoop: a task with no output still reports its statistics

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        ctx = self.stage_context(task.job, self.config.task_scan_threads)
        with self.stats.duration("task_stage_commit"):
            self._refuse_second_commit(ctx, task)
            attempt_dir = self.task_work_path(task)
            try:
                files, dirs = scan_task_attempt(ctx, attempt_dir, self.publishes_own_names)
            finally:
                ctx.pool.close()
            manifest = TaskManifest(
                job_id=task.job.job_uuid,
                job_attempt_number=task.job.attempt,
                task_id=str(task.task_id),
                task_attempt_id=str(task.attempt_id),
                task_attempt_dir=attempt_dir,
                files=files,
                directories=dirs,
                iostatistics=self.stats.snapshot(),
            )
            saved = manifest.to_bytes(self.store)
            path = save_task_manifest(ctx, manifest, saved)
        extra = {"manifest": path}
        copy = carry(saved)  # the job commit need not read it back (None: too large)
        if copy is not None:
            extra[CARRIED] = copy
        return TaskCommitMessage(
            job_id=str(task.job.job_id),
            task_id=str(task.task_id),
            attempt_id=str(task.attempt_id),
            committer=self.name,
            files=tuple(f.dest for f in files),
            bytes=manifest.total_size,
            extra=extra,
        )

    def _refuse_second_commit(self, ctx: StageContext, task: TaskAttemptContext) -> None:
        path = ctx.layout.manifest_path(str(task.task_id))
        try:
            saved = read_manifest(self.store, path)
        except NotFound:
            return
        source = self.store.full_url(path)
        if saved.task_attempt_id == str(task.attempt_id):
            raise TaskCommitError(f"task attempt {task.attempt_id} is already committed ({source})")

    def abort_task(self, task: TaskAttemptContext) -> None:
        layout = JobLayout.of(task.job)
        with self.stats.duration("task_stage_abort_task"):
            self.store.delete(self.task_work_path(task), recursive=True)
            self.store.delete(layout.manifest_tmp_path(str(task.attempt_id)))

    # --- job commit (the stages of job/commit.py; these are the manifest committer's own) ---------

    def job_dir(self, job: JobContext) -> str:
        return JobLayout.of(job).job_attempt_dir

    def prepare_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        """Load the manifests (the job's own files) before the claim is held; the entries
        file closes on a thread of its own, beside the intent written ahead. The guess: no
        file of the destination is in the way."""
        loaded = self._load(ctx, messages, close_beside=ctx.pool.threads > 1)
        self._prepared[job.job_uuid] = loaded
        return self._plan(loaded, [])

    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        loaded = self._prepared.pop(job.job_uuid, None)
        if loaded is None:
            loaded = self._load(ctx, messages)
        loaded.written()
        if loaded.kept is not None:
            self._kept[job.job_uuid] = loaded.kept
        # overwrite replaces everything visible, a partition overwrite each partition written:
        # nothing already there can be in the way
        replace = [] if job.mode in REPLACING_MODES else check_existing_files(ctx, loaded)
        self._seen[job.job_uuid] = loaded.seen_dirs
        return self._plan(loaded, replace)

    def _load(
        self, ctx: StageContext, messages: Sequence[TaskCommitMessage], close_beside: bool = False
    ) -> LoadedManifests:
        committed = {m.task_id: m.attempt_id for m in messages}
        entries = f"{ctx.layout.job_attempt_dir}/{ENTRIES_NAME}"
        return load_manifests(
            ctx, committed, ctx.store, entries, close_beside, carried_by(messages)
        )

    def _plan(self, loaded: LoadedManifests, replace: list[str]) -> CommitPlan:
        plan = ManifestPlan(
            entries=loaded.entries_path,
            entries_bytes=loaded.entries_bytes,
            manifests=loaded.manifests,
            files=loaded.files,
            bytes=loaded.bytes,
            task_attempts=dict(sorted(loaded.task_attempts.items())),
            directories=[
                PlannedDir(d.dest, int(d.status), d.level) for d in loaded.directories.values()
            ],
            replace_files=replace,
        )
        return CommitPlan(payload=plan, files=loaded.files, bytes=loaded.bytes)

    def _loaded(self, ctx: StageContext, plan: ManifestPlan) -> LoadedManifests:
        return LoadedManifests(
            ctx.store,
            plan.entries,
            directories={
                d.dest: DirEntry(d.dest, EntryStatus.of(d.status), d.level)
                for d in plan.directories
            },
            manifests=plan.manifests,
            files=plan.files,
            bytes=plan.bytes,
            task_attempts=dict(plan.task_attempts),
            entries_bytes=plan.entries_bytes,
        )

    def check_intent(self, ctx: StageContext, job: JobContext, intent: Intent) -> None:
        """The entries file as long as when it was written (the plan's own fields were
        checked as the record was read)."""
        self._loaded(ctx, intent.payload).check_size()

    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        plan: ManifestPlan = intent.payload
        loaded = self._loaded(ctx, plan)
        # checked by `check_intent` just before (finish_commit), before anything moved: a
        # damaged entries file changes nothing. Nothing since has touched the job's directory.
        loaded.size_checked = True
        # this process wrote the entries file of this very plan: its renames read the lines it
        # kept, not the file (a commit finished from its record reads the file)
        kept = self._kept.pop(job.job_uuid, None)
        seen = self._seen.pop(job.job_uuid, set())
        if not ctx.resumed:
            loaded.kept = kept
            # the tasks record their directories unknown (`scan.py`); those this process's
            # plan found existing, under the claim, are not created again (a commit finished
            # from its record creates every leaf: creating one that exists is harmless)
            for d in seen & loaded.directories.keys():
                old = loaded.directories[d]
                loaded.directories[d] = DirEntry(d, EntryStatus.DIR, old.level)
        ctx.pool.for_each(ctx.store.delete, plan.replace_files, adaptive=True)
        # a replaced data set took the directories seen existing with it: create them all
        dirs = create_directories(ctx, loaded.directories, force=bool(intent.replace))
        renamed = rename_files(ctx, loaded, dirs, resumed=ctx.resumed)
        if self.config.validate_output:
            validate_output(ctx, loaded)
        self.stats.set_counter("committer_tasks_completed", loaded.manifests)
        self._maybe_save_diagnostics(ctx)
        return Applied(
            files=renamed.files,
            bytes=renamed.bytes,
            filenames=[self.store.relative_path(u) for u in renamed.filenames],
            details={
                "recovered_renames": renamed.recovered,
                "directories_created": len(dirs.created),
            },
        )

    def success_bytes(
        self, ctx: StageContext, job: JobContext, intent: Intent, applied: Applied
    ) -> bytes | None:
        success = self._success_data(job)
        success.filenames = [self.store.full_url(f) for f in applied.filenames]
        self._fill(success, ctx, state="committed")
        success.diagnostics["mode"] = intent.mode
        self._maybe_save_summary(job, success, overwrite=True)
        return self.success_record(success) if self.config.mark_successful_jobs else None

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        return str(cleanup(ctx))

    def rollback_job(self, job: JobContext) -> None:
        ctx = self.stage_context(job, self.config.io_threads)
        try:
            cleanup(ctx, "job_stage_abort")
        finally:
            ctx.pool.close()

    def commit_failed(self, ctx: StageContext, job: JobContext, error: BaseException) -> None:
        self._kept.pop(job.job_uuid, None)
        self._seen.pop(job.job_uuid, None)
        loaded = self._prepared.pop(job.job_uuid, None)
        if loaded is not None:  # the commit stopped before its plan: let the close end first
            try:
                loaded.written()
            except Exception:
                pass
        success = self._success_data(job)
        success.success = False
        self._fill(success, ctx, state="failed")
        success.diagnostics["exception"] = f"{type(error).__name__}: {error}"
        self._maybe_save_summary(job, success, overwrite=True)

    @classmethod
    def tidy(cls, store: Store) -> None:
        store.delete_if_empty(PENDING_DIR)

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        """`_temporary/<jobUUID>/<NN>` of manifest jobs (v1's `_temporary/<NN>` are v1's)."""
        found = []
        for job in store.list_or_empty(PENDING_DIR):
            if not job.is_dir or job.name.isdigit():
                continue
            for attempt in store.list_or_empty(job.path):
                if attempt.is_dir and attempt.name.isdigit():
                    found.append(Leftover(attempt.path, cls.name, job.name, int(attempt.name)))
            if not any(f.path.startswith(job.path + "/") for f in found):
                found.append(Leftover(job.path, cls.name, job.name, 0))
        return found

    @classmethod
    def recover_leftover(cls, store: Store, leftover: Leftover, rollback: bool = False) -> str:
        outcome = super().recover_leftover(store, leftover, rollback)
        store.delete_if_empty(paths.parent(leftover.path))  # the job's directory
        return outcome  # `_temporary` itself goes in `tidy`, once cleanup is through

    def _success_data(self, job: JobContext) -> SuccessData:
        return SuccessData.for_job(
            COMMITTER_NAME, job, f"Job {job.job_id} committed by dataferry's manifest committer"
        )

    def _fill(self, success: SuccessData, ctx: StageContext, state: str) -> None:
        stats = IOStatistics(self.stats.snapshot())
        stats.merge({"counters": {k: v for k, v in self.store.stats.counters.items()}})
        success.metrics = {
            k: v for k, v in self.stats.counters.items() if k.startswith("committer_")
        }
        success.iostatistics = stats.snapshot()
        success.state = state
        success.stage = "committer_commit_job" if state == "committed" else ctx.last_stage
        success.diagnostics.update(
            {
                "stage": ctx.last_stage,
                "mapreduce.manifest.committer.io.threads": str(self.config.io_threads),
            }
        )

    def _maybe_save_summary(self, job: JobContext, data: SuccessData, overwrite: bool) -> None:
        if not self.config.summary_report_dir:
            return
        try:
            reports = open_store(self.config.summary_report_dir)
            reports.write_bytes(
                f"summary-{job.job_uuid}.json", data.to_bytes(), overwrite=overwrite
            )
        except Exception:  # a report must never turn a good commit bad, or hide the real error
            self.stats.incr("committer_summary_report_failures")

    def _maybe_save_diagnostics(self, ctx: StageContext) -> None:
        target = self.config.diagnostics_manifest_dir
        if not target:
            return
        try:
            dest = paths.join(target, ctx.layout.job_uuid)
            self.store.mkdirs(paths.parent(dest)) if paths.parent(dest) else None
            if not self.store.exists(dest):
                self.store.rename(ctx.layout.manifests_dir, dest)
        except Exception:
            self.stats.incr("committer_diagnostics_failures")

    # --- cleanup ---------------------------------------------------------------------------

    def cleanup_job(self, job: JobContext) -> CleanupOutcome:
        ctx = self.stage_context(job, self.config.io_threads)
        try:
            return cleanup(ctx)
        finally:
            ctx.pool.close()
