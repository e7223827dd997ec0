"""The manifest committer: v1's safety with a parallel job commit.

Task commit writes a manifest listing the attempt's files (they stay where they are); job commit
loads the committed tasks' manifests, creates the leaf directories and renames every file in
parallel, then writes a JSON `_SUCCESS`. Made for stores with atomic O(1) file rename but slow or
non-atomic directory operations (ABFS, GCS with care, HDFS under load); not for S3, which has no
rename at all (use the magic committer there).

Stages (each in `stages/`, each timed into the committer's statistics):
    setup_job -> [tasks: setup_task, scan_task_attempt, save_task_manifest]
    -> load_manifests -> create_directories -> rename_files -> [validate_output]
    -> save_success -> cleanup
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import CommitError, JobCommitError, NotFound, TaskCommitError
from ...stats import IOStatistics
from ...store import IOPool, Store, open_store, paths
from ...store.scratch import scratch_store
from ..protocol import (
    Committer,
    JobCommitResult,
    JobContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from ..success import SUCCESS_FILE, SuccessData
from .config import ManifestConfig
from .files import TaskManifest
from .layout import JobLayout
from .stages.base import StageContext
from .stages.cleanup import CleanupOutcome, cleanup
from .stages.create_dirs import create_directories
from .stages.load import load_manifests
from .stages.rename import rename_files
from .stages.save_manifest import save_task_manifest
from .stages.scan import scan_task_attempt
from .stages.setup import setup_job, setup_task
from .stages.success import save_success
from .stages.validate import validate_output

COMMITTER_NAME = "dataferry.commit.manifest.ManifestCommitter"


@dataclass
class ManifestJobCommitResult(JobCommitResult):
    cleanup: str = ""
    recovered_renames: int = 0
    directories_created: int = 0
    success: SuccessData | None = None


class ManifestCommitter(Committer):
    name = "manifest"

    def __init__(self, store: Store, config: ManifestConfig) -> None:
        super().__init__(store, config)

    def _ctx(self, job: JobContext, threads: int = 1) -> StageContext:
        return StageContext(
            store=self.store,
            layout=JobLayout.of(job),
            config=self.config,
            stats=self.stats,
            pool=IOPool(threads),
            job_id=str(job.job_id),
        )

    # --- job setup -------------------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        self.check_destination()
        setup_job(self._ctx(job))

    # --- task side -------------------------------------------------------------------------

    def task_work_path(self, task: TaskAttemptContext) -> str:
        return JobLayout.of(task.job).task_attempt_dir(task)

    def setup_task(self, task: TaskAttemptContext) -> None:
        setup_task(self._ctx(task.job), self.task_work_path(task))

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return True  # as Hadoop: a task with no output still reports its statistics

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        ctx = self._ctx(task.job, self.config.task_scan_threads)
        with self.stats.duration("task_stage_commit"):
            self._refuse_second_commit(ctx, task)
            attempt_dir = self.task_work_path(task)
            try:
                files, dirs = scan_task_attempt(ctx, attempt_dir)
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
            save_task_manifest(ctx, manifest)
        return TaskCommitMessage(
            job_id=str(task.job.job_id),
            task_id=str(task.task_id),
            attempt_id=str(task.attempt_id),
            committer=self.name,
            files=tuple(f.dest for f in files),
            bytes=manifest.total_size,
            extra={"manifest": ctx.layout.manifest_path(str(task.task_id))},
        )

    def _refuse_second_commit(self, ctx: StageContext, task: TaskAttemptContext) -> None:
        path = ctx.layout.manifest_path(str(task.task_id))
        try:
            raw = self.store.read_bytes(path)
        except NotFound:
            return
        source = self.store.full_url(path)
        if TaskManifest.from_bytes(raw, self.store, source).task_attempt_id == str(task.attempt_id):
            raise TaskCommitError(f"task attempt {task.attempt_id} is already committed ({source})")

    def abort_task(self, task: TaskAttemptContext) -> None:
        layout = JobLayout.of(task.job)
        with self.stats.duration("task_stage_abort_task"):
            self.store.delete(self.task_work_path(task), recursive=True)
            self.store.delete(layout.manifest_tmp_path(str(task.attempt_id)))

    # --- job commit ------------------------------------------------------------------------

    def commit_job(
        self, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> ManifestJobCommitResult:
        self.check_messages(job, messages)
        ctx = self._ctx(job, self.config.io_threads)
        start = time.perf_counter()
        success = self._success_data(job)
        try:
            with self.stats.duration("committer_commit_job"), scratch_store() as scratch:
                committed = {m.task_id: m.attempt_id for m in messages}
                loaded = load_manifests(ctx, committed, scratch)
                dirs = create_directories(ctx, loaded.directories)
                renamed = rename_files(ctx, loaded, dirs)
                if self.config.validate_output:
                    validate_output(ctx, loaded)
                self.stats.set_counter("committer_files_committed", renamed.files)
                self.stats.set_counter("committer_bytes_committed", renamed.bytes)
                self.stats.set_counter("committer_tasks_completed", loaded.manifests)
                self._maybe_save_diagnostics(ctx)
                success.filenames = renamed.filenames
                self._fill(success, ctx, state="committed")
                if self.config.mark_successful_jobs:
                    save_success(ctx, success)
                outcome = cleanup(ctx)
        except BaseException as e:
            success.success = False
            self._fill(success, ctx, state="failed")
            success.diagnostics["exception"] = f"{type(e).__name__}: {e}"
            self._maybe_save_summary(job, success, overwrite=True)
            if isinstance(e, Exception) and not isinstance(e, CommitError):
                raise JobCommitError(
                    f"job {job.job_id}: job commit failed in stage {ctx.last_stage}: {e}"
                ) from e
            raise
        finally:
            ctx.pool.close()
        ctx.stage_seconds["total"] = time.perf_counter() - start
        self._maybe_save_summary(job, success, overwrite=True)
        return ManifestJobCommitResult(
            job_id=str(job.job_id),
            committer=self.name,
            files=renamed.files,
            bytes=renamed.bytes,
            success_path=SUCCESS_FILE if self.config.mark_successful_jobs else None,
            stage_seconds=dict(ctx.stage_seconds),
            iostatistics=self.stats,
            filenames=[self.store.relative_path(u) for u in renamed.filenames],
            cleanup=str(outcome),
            recovered_renames=renamed.recovered,
            directories_created=len(dirs.created),
            success=success,
        )

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
            self.store.rename(ctx.layout.manifests_dir, dest)
        except Exception:
            self.stats.incr("committer_diagnostics_failures")

    # --- abort and cleanup -----------------------------------------------------------------

    def abort_job(self, job: JobContext) -> None:
        ctx = self._ctx(job, self.config.io_threads)
        try:
            cleanup(ctx, "job_stage_abort")
        finally:
            ctx.pool.close()
        report = self._success_data(job)
        report.success = False
        self._fill(report, ctx, state="aborted")
        self._maybe_save_summary(job, report, overwrite=False)

    def cleanup_job(self, job: JobContext) -> CleanupOutcome:
        ctx = self._ctx(job, self.config.io_threads)
        try:
            return cleanup(ctx)
        finally:
            ctx.pool.close()
