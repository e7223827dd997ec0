"""Hive-style insert: commit into a staging directory, then load into the table.

Tasks write and commit through an inner committer (manifest by default) rooted at
`<table>/.hive-staging_hive_.../-ext-10000`, exactly where Spark's InsertIntoHiveTable puts
them. Job commit (the one every committer shares, `commit/job/commit.py`) first commits the
inner job there and plans the load (its journal of moves is the intent record's payload), then
moves the staged partitions into the table (a directory rename per new partition where that is
atomic and O(1), parallel file moves otherwise), records the partitions in the catalog, writes
`_SUCCESS` and deletes the staging directory. A load that died is finished from its journal by
`dataferry cleanup` or the next job, or undone from it with `cleanup --rollback` (the partitions
it replaced wait in the staging directory until the load is complete).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, BinaryIO

from ...errors import ConfigError
from ...stages import stage
from ...store import IOPool, Store, paths
from ...store.substore import SubStore
from ..base import Committer
from ..factory import build_committer, build_config
from ..job.recovery import recover_job
from ..job.stages import check_destination
from ..lookup import committer_by_name, job_from_ids
from ..protocol import (
    Applied,
    CommitPlan,
    JobCommitResult,
    JobContext,
    Leftover,
    StageContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from ..records.intent import Intent, load_intent, mark_phase, phase_done, save_intent
from ..registry import KNOWN
from .catalog import Catalog, open_catalog
from .config import MODES, HiveConfig
from .journal import HivePlan, Journal
from .load import LoadPools, LoadStats, in_place, plan_load, register, run_steps
from .staging import ext_dir, is_staging_dir, staging_dir

COMMITTER_NAME = "dataferry.commit.hive.HiveCommitter"


class HiveCommitter(Committer):
    name = "hive"
    # INSERT OVERWRITE replaces the partitions written; overwrite-table the whole table
    mode_meanings = {"overwrite": "overwrite-partitions", "overwrite-table": "overwrite"}
    plan_type = HivePlan

    def __init__(self, store: Store, config: HiveConfig) -> None:
        super().__init__(store, config)

    # --- the inner committer, rooted at the staging directory -------------------------------

    def _inner(self, job: JobContext) -> tuple[Committer, JobContext]:
        cfg = self.config
        # the load's I/O threads carry over to an inner committer that has the option
        inner_fields = {f.name for f in dataclasses.fields(KNOWN[cfg.inner].config_class())}
        options = {"io_threads": cfg.io_threads} if "io_threads" in inner_fields else {}
        inner_config = build_config(cfg.inner, options)
        sub = SubStore(self.store, ext_dir(job))
        inner = build_committer(cfg.inner, sub, inner_config)
        inner.publishes_own_names = False  # the load gives the staged files their own names
        inner_job = replace(
            job, store=sub, committer=cfg.inner, config=inner_config, mode="append", claim=False
        )
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
        check_destination(self.store)
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

    # --- job commit: inner commit, then the load (stages of job/commit.py) -------------------

    @classmethod
    def prepare_mode(cls, mode: str) -> tuple[str, dict[str, Any]]:
        """A Hive insert applies `append`, `overwrite` (the partitions written) and
        `overwrite-table` in its load; `error` loads only into an empty table."""
        if mode == "error":
            return "error", {"mode": "append"}
        if mode == "overwrite-partitions":  # pyarrow's delete_matching: Hive's own overwrite
            return "append", {"mode": "overwrite"}
        if mode not in MODES:
            raise ConfigError(
                f"unknown hive mode {mode!r}; committer 'hive' takes mode "
                f"{', '.join(repr(m) for m in ('error', 'overwrite-partitions', *MODES))}"
            )
        return "append", {"mode": mode}

    def job_dir(self, job: JobContext) -> str:
        return staging_dir(job)

    def stage_context(self, job: JobContext, threads: int | None = None) -> StageContext:
        return super().stage_context(job, threads or self.config.move_threads)

    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        inner, inner_job = self._inner(job)
        staged = commit_staging(ctx, inner, inner_job, messages)
        self.stats.merge(inner.stats)
        journal = self._plan(ctx, job)
        plan = HivePlan(journal=journal, catalog=self.config.catalog, files=staged.files)
        return CommitPlan(plan, staged.files, staged.bytes)

    def _plan(self, ctx: StageContext, job: JobContext) -> Journal:
        pools = self._pools()
        try:
            return plan_load_stage(
                ctx,
                staging_dir(job),
                ext_dir(job),
                self.config.mode,
                self.table_name(),
                str(job.job_id),
                pools,
            )
        finally:
            pools.close()

    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        """The load from its journal (checked as the record was read: a damaged one neither
        runs nor is undone)."""
        plan: HivePlan = intent.payload
        pools = self._pools()
        try:
            stats = run_load(ctx, self.job_dir(job), plan.journal, plan.catalog, pools)
        finally:
            pools.close()
        moved = [s.dst for s in plan.journal.steps if s.phase == "in"]
        return Applied(
            files=plan.files,
            filenames=moved[:100],
            details={"load": stats},
        )

    def load(self, job: JobContext) -> LoadStats:
        """Load a committed staging tree into the table (the job commit's second half), from a
        fresh plan: what `bench hive` measures."""
        ctx = self.stage_context(job)
        try:
            journal = self._plan(ctx, job)
            save_intent(self.store, staging_dir(job), _intent_of(job, journal, self))
            pools = self._pools()
            try:
                stats = run_load(ctx, staging_dir(job), journal, self.config.catalog, pools)
            finally:
                pools.close()
            self.store.delete(staging_dir(job), recursive=True)
        finally:
            ctx.close()
        stats.stage_seconds = dict(ctx.stage_seconds)
        return stats

    def success_committer_name(self) -> str:
        return COMMITTER_NAME

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        self.store.delete(staging_dir(job), recursive=True)  # with the partitions replaced
        return "deleted"

    # --- recovery ----------------------------------------------------------------------------

    can_undo_decided = True  # the replaced partitions wait in the staging directory

    def rollback_job(self, job: JobContext) -> None:
        """Undo the load's moves from its intent record, if it has one (the replaced partitions
        come back from the staging directory), then delete the staging directory."""
        intent = load_intent(self.store, staging_dir(job), self.plan_type)
        if intent is not None:
            pools = self._pools()
            try:
                undo_load(self.store, intent.payload.journal, pools)
            finally:
                pools.close()
        inner, inner_job = self._inner(job)
        inner.rollback_job(inner_job)
        self.store.delete(staging_dir(job), recursive=True)

    def cleanup_job(self, job: JobContext) -> None:
        with self.stats.duration("job_stage_cleanup"):
            if load_intent(self.store, staging_dir(job)) is None:
                self.store.delete(staging_dir(job), recursive=True)

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        if not store.exists(""):
            return []
        return [Leftover(e.path, cls.name) for e in store.list("") if is_staging_dir(e.name)]

    @classmethod
    def recover_leftover(cls, store: Store, leftover: Leftover, rollback: bool = False) -> str:
        """A staging directory names its job only through its intent record; without one the
        load never started and nothing of the job is in the table."""
        intent = load_intent(store, leftover.path)
        outcome = "rolled back"
        if intent is not None:
            committer = committer_by_name(cls.name, store)
            job = job_from_ids(committer, intent.job_id, intent.job_uuid, 0)
            outcome = recover_job(committer, job, rollback=rollback)
        store.delete(leftover.path, recursive=True)
        return outcome


def _intent_of(job: JobContext, journal: Journal, committer: HiveCommitter) -> Intent:
    return Intent(
        job_id=str(job.job_id),
        job_uuid=job.job_uuid,
        committer=committer.name,
        mode=job.mode,
        payload=HivePlan(journal=journal, catalog=committer.config.catalog, files=0),
    )


@stage("hive_stage_commit_staging", "commit_staging")
def commit_staging(
    ctx: StageContext,
    inner: Committer,
    inner_job: JobContext,
    messages: Sequence[TaskCommitMessage],
) -> JobCommitResult:
    """Commit the tasks into the staging directory through the inner committer (hidden from
    readers; a crash here leaves nothing in the table)."""
    return inner.commit_job(inner_job, messages)


@stage("hive_stage_plan", "plan")
def plan_load_stage(ctx: StageContext, *args: Any) -> Journal:
    return plan_load(ctx.store, *args)


def run_load(
    ctx: StageContext, job_dir: str, journal: Journal, catalog: str, pools: LoadPools
) -> LoadStats:
    """The load's moves, each phase once: replaced partitions aside, staged ones in, then the
    catalog. Phase markers keep a resumed load from moving the new partitions aside again."""
    result = LoadStats(partitions=len(journal.partitions))
    if not phase_done(ctx.store, job_dir, "aside"):
        result.aside = move_aside(ctx, journal, pools)
        mark_phase(ctx.store, job_dir, "aside")
    moved_in = [s for s in journal.steps if s.phase == "in"]
    if not phase_done(ctx.store, job_dir, "moved"):
        move_in(ctx, moved_in, pools)
        mark_phase(ctx.store, job_dir, "moved")
    result.dir_renames = sum(1 for s in moved_in if s.directory)
    result.renamed_in_place = sum(1 for s in moved_in if in_place(s))
    result.file_moves = len(moved_in) - result.dir_renames - result.renamed_in_place
    if catalog and not phase_done(ctx.store, job_dir, "registered"):
        register_stage(ctx, open_catalog(catalog), journal, pools)
        mark_phase(ctx.store, job_dir, "registered")
    return result


@stage("hive_stage_move_aside", "move_aside")
def move_aside(ctx: StageContext, journal: Journal, pools: LoadPools) -> int:
    aside = [s for s in journal.steps if s.phase == "aside"]
    return run_steps(ctx.store, aside, pools, fence=ctx.fence, stats=ctx.stats)


@stage("hive_stage_move_in", "move_in")
def move_in(ctx: StageContext, steps: list, pools: LoadPools) -> int:
    return run_steps(ctx.store, steps, pools, fence=ctx.fence, stats=ctx.stats)


@stage("hive_stage_register", "register")
def register_stage(ctx: StageContext, catalog: Catalog, journal: Journal, pools: LoadPools) -> None:
    register(ctx.store, catalog, journal, ctx.store.full_url(), pools)


def undo_load(store: Store, journal: Journal, pools: LoadPools) -> None:
    """Every move of the load backwards: staged partitions out, replaced ones back."""
    for phase in ("in", "aside"):
        steps = [s for s in reversed(journal.steps) if s.phase == phase]
        run_steps(store, steps, pools, backwards=True)
