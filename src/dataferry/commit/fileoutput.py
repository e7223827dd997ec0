"""Hadoop's FileOutputCommitter, algorithms v1 and v2: the baselines.

Layout (as Hadoop):
    $dest/_temporary/<appAttempt>/_temporary/<taskAttemptId>/   task attempt work directory
    $dest/_temporary/<appAttempt>/<taskId>/                     committed task (v1)

v1: task commit renames the attempt directory to the committed-task directory (atomic where
directory rename is atomic); job commit merges every committed task into the destination
(`merge_paths`: a whole directory is renamed when the target does not exist, else file by file),
deletes `_temporary` and writes an empty `_SUCCESS`. Safe on stores with atomic directory rename,
but job commit is serial and O(files) once tasks share partition directories.

v2: task commit merges the attempt's files straight into the destination, file by file.
UNSAFE, kept only as a baseline: task commit is not atomic, so an attempt that dies half way
through its commit leaves part of its output in place, and a retried or speculative attempt
adds its own; committed output is visible before the job commits and stays visible if the job
fails. The crash-point harness shows both violations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import AccessDenied, DestinationError, NotFound, TaskCommitError
from ..stats import StageClock
from ..store import FileStatus, paths
from .protocol import (
    Committer,
    JobCommitResult,
    JobContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from .success import SUCCESS_FILE

PENDING_DIR = "_temporary"


@dataclass(frozen=True)
class FileOutputConfig:
    """Options of FileOutputCommitter.

    algorithm: `mapreduce.fileoutputcommitter.algorithm.version` (1 or 2).
    mark_successful_jobs: `mapreduce.fileoutputcommitter.marksuccessfuljobs` (write `_SUCCESS`).
    cleanup_skipped: `mapreduce.fileoutputcommitter.cleanup.skipped`.
    cleanup_failures_ignored: `mapreduce.fileoutputcommitter.cleanup-failures.ignored`.
    task_cleanup_enabled: `mapreduce.fileoutputcommitter.task.cleanup.enabled` (v2 only; on
        by default here so an attempt's emptied directories do not linger until job cleanup).
    """

    algorithm: int = 1
    mark_successful_jobs: bool = True
    cleanup_skipped: bool = False
    cleanup_failures_ignored: bool = False
    task_cleanup_enabled: bool = True

    def __post_init__(self) -> None:
        if self.algorithm not in (1, 2):
            from ..errors import ConfigError

            raise ConfigError(
                f"FileOutputCommitter algorithm must be 1 or 2, got {self.algorithm!r}"
            )


class FileOutputCommitter(Committer):
    """v1 or v2, chosen by `config.algorithm`."""

    def __init__(self, store, config: FileOutputConfig) -> None:
        super().__init__(store, config)
        self.name = f"v{config.algorithm}"

    # --- layout ----------------------------------------------------------------------------

    def job_attempt_path(self, job: JobContext) -> str:
        return f"{PENDING_DIR}/{job.attempt}"

    def task_work_path(self, task: TaskAttemptContext) -> str:
        return f"{self.job_attempt_path(task.job)}/{PENDING_DIR}/{task.attempt_id}"

    def committed_task_path(self, task: TaskAttemptContext) -> str:
        return f"{self.job_attempt_path(task.job)}/{task.task_id}"

    # --- job setup -------------------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        with self.stats.duration("job_stage_setup"):
            self.check_destination()
            try:
                self.store.mkdirs(self.job_attempt_path(job))
            except AccessDenied as e:
                raise DestinationError(
                    f"destination {self.store.full_url()} is not writable: {e}"
                ) from None

    # --- task side -------------------------------------------------------------------------

    def setup_task(self, task: TaskAttemptContext) -> None:
        with self.stats.duration("task_stage_setup"):
            self.store.mkdirs(self.task_work_path(task))

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        return self.store.exists(self.task_work_path(task))

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        with self.stats.duration("task_stage_commit"):
            work = self.task_work_path(task)
            try:
                st = self.store.stat(work)
            except NotFound:
                raise TaskCommitError(
                    f"task attempt {task.attempt_id}: no work directory "
                    f"{self.store.full_url(work)}; it was never set up, or it was already "
                    "committed or aborted"
                ) from None
            files = self.store.walk(work) if st.is_dir else []
            if self.config.algorithm == 1:
                committed = self.committed_task_path(task)
                self.store.delete(committed, recursive=True)  # a dead earlier attempt's output
                self.store.rename(work, committed)
            else:
                self._merge_paths(st, "")
                if self.config.task_cleanup_enabled:
                    self.store.delete(work, recursive=True)
        return TaskCommitMessage(
            job_id=str(task.job.job_id),
            task_id=str(task.task_id),
            attempt_id=str(task.attempt_id),
            committer=self.name,
            files=tuple(paths.relative_to(f.path, work) for f in files),
            bytes=sum(f.size for f in files),
        )

    def abort_task(self, task: TaskAttemptContext) -> None:
        with self.stats.duration("task_stage_abort_task"):
            self.store.delete(self.task_work_path(task), recursive=True)

    # --- job commit ------------------------------------------------------------------------

    def commit_job(self, job: JobContext, messages: Sequence[TaskCommitMessage]) -> JobCommitResult:
        self.check_messages(job, messages)
        clock = StageClock(self.stats)
        with self.stats.duration("committer_commit_job"):
            if self.config.algorithm == 1:
                with clock.stage("merge_paths", "job_stage_merge_paths"):
                    for m in sorted(messages, key=lambda m: m.task_id):
                        src = f"{self.job_attempt_path(job)}/{m.task_id}"
                        self._merge_paths(self.store.stat(src), "")
            with clock.stage("cleanup"):
                self._cleanup(job, "job_stage_cleanup")
            if self.config.mark_successful_jobs:
                with clock.stage("save_success", "job_stage_save_success_marker"):
                    self.store.write_bytes(SUCCESS_FILE, b"")
        stages = clock.finish()
        files = [f for m in messages for f in m.files]
        return JobCommitResult(
            job_id=str(job.job_id),
            committer=self.name,
            files=len(files),
            bytes=sum(m.bytes for m in messages),
            success_path=SUCCESS_FILE if self.config.mark_successful_jobs else None,
            stage_seconds=stages,
            iostatistics=self.stats,
            filenames=sorted(files)[:100],
        )

    def _merge_paths(self, src: FileStatus, dst: str) -> None:
        """Hadoop's mergePaths: move `src` to `dst`, merging into directories that exist."""
        if not src.is_dir:
            if self.store.exists(dst):
                self.store.delete(dst, recursive=True)
            self.store.rename(src.path, dst)
            return
        try:
            target = self.store.stat(dst)
        except NotFound:
            target = None
        if target is not None and not target.is_dir:
            self.store.delete(dst)
            target = None
        if target is not None:
            for child in self.store.list(src.path):
                self._merge_paths(child, paths.join(dst, child.name))
        elif self.config.algorithm == 1:
            self.store.rename(src.path, dst)
        else:
            self.store.mkdirs(dst)
            for child in self.store.list(src.path):
                self._merge_paths(child, paths.join(dst, child.name))

    # --- abort and cleanup -----------------------------------------------------------------

    def abort_job(self, job: JobContext) -> None:
        self._cleanup(job, "job_stage_abort")

    def cleanup_job(self, job: JobContext) -> None:
        self._cleanup(job, "job_stage_cleanup")

    def _cleanup(self, job: JobContext, stat: str) -> None:
        if self.config.cleanup_skipped:
            return
        with self.stats.duration(stat):
            try:
                self.store.delete(PENDING_DIR, recursive=True)
            except Exception:
                if not self.config.cleanup_failures_ignored:
                    raise
