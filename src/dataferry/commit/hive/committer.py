"""Hive-style insert: commit into a staging directory, then load into the table.

Tasks write and commit through an inner committer (manifest by default) rooted at
`<table>/.hive-staging_hive_.../-ext-10000`, exactly where Spark's InsertIntoHiveTable puts
them. Job commit first commits the inner job there, then loads: it writes a journal, moves the
staged partitions into the table (a directory rename per new partition where that is atomic and
O(1), parallel file moves otherwise), records the partitions in the catalog, writes `_SUCCESS`
and deletes the staging directory. A load that fails is rolled back from its journal; one whose
process died is completed by `resume_load` (what `dataferry cleanup` runs) or undone by
`abort_job`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO

from ...errors import CommitError, JobCommitError
from ...stats import StageClock
from ...store import IOPool, Store, paths
from ...store.catalog import Catalog, open_catalog
from ...store.substore import SubStore
from ..factory import build_committer, build_config
from ..protocol import (
    Committer,
    JobCommitResult,
    JobContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from ..success import SUCCESS_FILE, SuccessData
from .config import HiveConfig
from .journal import Journal, load_journal, save_journal
from .load import LoadPools, LoadStats, plan_load, register, run_steps
from .staging import JOURNAL, ext_dir, staging_dir

COMMITTER_NAME = "dataferry.commit.hive.HiveCommitter"


@dataclass
class HiveJobCommitResult(JobCommitResult):
    load: LoadStats | None = None


class HiveCommitter(Committer):
    name = "hive"

    def __init__(self, store: Store, config: HiveConfig) -> None:
        super().__init__(store, config)

    # --- the inner committer, rooted at the staging directory -------------------------------

    def _inner(self, job: JobContext) -> tuple[Committer, JobContext]:
        cfg = self.config
        options = {"io_threads": cfg.io_threads} if cfg.inner == "manifest" else {}
        inner_config = build_config(cfg.inner, options)
        sub = SubStore(self.store, ext_dir(job))
        inner = build_committer(cfg.inner, sub, inner_config)
        inner_job = replace(job, store=sub, committer=cfg.inner, config=inner_config)
        return inner, inner_job

    def _inner_task(self, task: TaskAttemptContext) -> tuple[Committer, TaskAttemptContext]:
        inner, inner_job = self._inner(task.job)
        return inner, TaskAttemptContext(inner_job, task.attempt_id)

    def _pools(self) -> LoadPools:
        return LoadPools(
            IOPool(self.config.load_partition_threads), IOPool(self.config.move_threads)
        )

    def _catalog(self) -> Catalog | None:
        return open_catalog(self.config.catalog) if self.config.catalog else None

    def table_name(self) -> str:
        return self.config.table or self.store.full_url().rstrip("/").rsplit("/", 1)[-1] or "table"

    # --- job and task ----------------------------------------------------------------------

    def setup_job(self, job: JobContext) -> None:
        self.check_destination()
        with self.stats.duration("job_stage_setup"):
            self.store.mkdirs(ext_dir(job))
            inner, inner_job = self._inner(job)
            inner.setup_job(inner_job)

    def setup_task(self, task: TaskAttemptContext) -> None:
        inner, t = self._inner_task(task)
        inner.setup_task(t)

    def task_work_path(self, task: TaskAttemptContext) -> str:
        inner, t = self._inner_task(task)
        return paths.join(ext_dir(task.job), inner.task_work_path(t))

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        inner, t = self._inner_task(task)
        return paths.join(ext_dir(task.job), inner.write_file(t, relpath, data))

    def open_file(self, task: TaskAttemptContext, relpath: str) -> BinaryIO:
        inner, t = self._inner_task(task)
        return inner.open_file(t, relpath)

    def needs_task_commit(self, task: TaskAttemptContext) -> bool:
        inner, t = self._inner_task(task)
        return inner.needs_task_commit(t)

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        inner, t = self._inner_task(task)
        msg = inner.commit_task(t, written)
        self.stats.merge(inner.stats)
        return msg

    def abort_task(self, task: TaskAttemptContext) -> None:
        inner, t = self._inner_task(task)
        inner.abort_task(t)

    # --- job commit: inner commit, then the load ---------------------------------------------

    def commit_job(
        self, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> HiveJobCommitResult:
        self.check_messages(job, messages)
        start = time.perf_counter()
        inner, inner_job = self._inner(job)
        with self.stats.duration("committer_commit_job"):
            inner_result = inner.commit_job(inner_job, messages)
            self.stats.merge(inner.stats)
            stages = {
                f"staging_{k}": v for k, v in inner_result.stage_seconds.items() if k != "total"
            }
            try:
                load = self._load(job)
            except BaseException as e:
                if isinstance(e, Exception):
                    self._undo_load(job)
                    if not isinstance(e, CommitError):
                        raise JobCommitError(
                            f"job {job.job_id}: load into the table failed: {e}"
                        ) from e
                raise
        stages.update({f"load_{k}": v for k, v in load.stage_seconds.items()})
        stages["total"] = time.perf_counter() - start
        return HiveJobCommitResult(
            job_id=str(job.job_id),
            committer=self.name,
            files=inner_result.files,
            bytes=inner_result.bytes,
            success_path=SUCCESS_FILE if self.config.mark_successful_jobs else None,
            stage_seconds=stages,
            iostatistics=self.stats,
            filenames=inner_result.filenames,
            load=load,
        )

    def load(self, job: JobContext) -> LoadStats:
        """Load a committed staging tree into the table (job commit's second half)."""
        return self._load(job)

    def _load(self, job: JobContext, journal: Journal | None = None) -> LoadStats:
        staging = staging_dir(job)
        result = LoadStats()
        clock = StageClock(self.stats)
        pools = self._pools()
        try:
            if journal is None:
                with clock.stage("plan", "hive_stage_plan"):
                    journal = plan_load(
                        self.store,
                        staging,
                        ext_dir(job),
                        self.config.mode,
                        self.table_name(),
                        str(job.job_id),
                        pools,
                    )
                    save_journal(self.store, f"{staging}/{JOURNAL}", journal)
            result.partitions = len(journal.partitions)
            if journal.state == "planned":
                with clock.stage("move_aside", "hive_stage_move_aside"):
                    result.aside = run_steps(
                        self.store, [s for s in journal.steps if s.phase == "aside"], pools
                    )
                with clock.stage("move_in", "hive_stage_move_in"):
                    moved_in = [s for s in journal.steps if s.phase == "in"]
                    run_steps(self.store, moved_in, pools)
                result.dir_renames = sum(1 for s in moved_in if s.directory)
                result.file_moves = len(moved_in) - result.dir_renames
                journal.state = "moved"
                save_journal(self.store, f"{staging}/{JOURNAL}", journal)
            catalog = self._catalog()
            if journal.state == "moved":
                if catalog is not None:
                    with clock.stage("register", "hive_stage_register"):
                        register(self.store, catalog, journal, self.store.full_url(), pools)
                journal.state = "registered"
                save_journal(self.store, f"{staging}/{JOURNAL}", journal)
            if self.config.mark_successful_jobs:
                with clock.stage("save_success", "hive_stage_save_success"):
                    self._save_success(job, journal)
            with clock.stage("cleanup", "hive_stage_cleanup"):
                self.store.delete(staging, recursive=True)
        finally:
            pools.close()
            result.stage_seconds = dict(clock.seconds)
        return result

    def _save_success(self, job: JobContext, journal: Journal) -> None:
        data = SuccessData.for_job(
            COMMITTER_NAME,
            job,
            f"Hive-style {journal.mode} of job {job.job_id} into {self.table_name()}",
            metrics={"committer_partitions_loaded": len(journal.partitions)},
            diagnostics={"mode": journal.mode, "partitions": ",".join(journal.partitions[:100])},
            filenames=[self.store.full_url(s.dst) for s in journal.steps if s.phase == "in"][:100],
            iostatistics=self.stats.snapshot(),
        )
        tmp = f"{staging_dir(job)}/{SUCCESS_FILE}.tmp"
        self.store.write_bytes(tmp, data.to_bytes())
        self.store.delete(SUCCESS_FILE)
        self.store.rename(tmp, SUCCESS_FILE)

    # --- recovery ----------------------------------------------------------------------------

    def resume_load(self, job: JobContext) -> LoadStats | None:
        """Complete a load whose process died, from its journal (None if it had none)."""
        journal = load_journal(self.store, f"{staging_dir(job)}/{JOURNAL}")
        if journal is None:
            return None
        return self._load(job, journal)

    def _undo_load(self, job: JobContext) -> bool:
        """Put the table back as it was before the load, from the journal."""
        staging = staging_dir(job)
        journal = load_journal(self.store, f"{staging}/{JOURNAL}")
        if journal is None or journal.state == "registered":
            return False  # nothing moved yet, or the load is complete: nothing to undo
        pools = self._pools()
        try:
            run_steps(
                self.store,
                [s for s in reversed(journal.steps) if s.phase == "in"],
                pools,
                backwards=True,
            )
            run_steps(
                self.store,
                [s for s in reversed(journal.steps) if s.phase == "aside"],
                pools,
                backwards=True,
            )
            self.store.delete(f"{staging}/{JOURNAL}")
        finally:
            pools.close()
        return True

    def abort_job(self, job: JobContext) -> None:
        with self.stats.duration("job_stage_abort"):
            self._undo_load(job)
            inner, inner_job = self._inner(job)
            inner.abort_job(inner_job)
            self.store.delete(staging_dir(job), recursive=True)

    def cleanup_job(self, job: JobContext) -> None:
        with self.stats.duration("job_stage_cleanup"):
            if load_journal(self.store, f"{staging_dir(job)}/{JOURNAL}") is None:
                self.store.delete(staging_dir(job), recursive=True)
