"""Job commit's last stage (and abort's only one): delete this job's temporary directories.

Task attempt directories go first, in parallel (a single recursive delete of a large tree can
time out on object stores); then the job directory; then `_temporary` itself only if it is
empty, so that other jobs writing to the same destination are left alone (Hadoop deletes all of
`_temporary`, which is why it cannot run two jobs into one destination). Where the store deletes
a tree in one request (`tree_delete`: HDFS's NameNode, one call whatever the tree holds), the
job directory is deleted in that one call, attempts and all: nothing is listed first.
"""

from __future__ import annotations

from enum import StrEnum

from ....errors import StoreError
from ....stages import stage
from ...protocol import StageContext
from ..layout import PENDING_DIR


class CleanupOutcome(StrEnum):
    DISABLED = "disabled"
    NOTHING_TO_CLEAN_UP = "nothing to clean up"
    PARALLEL_DELETE = "parallel delete"
    DELETED = "deleted"
    FAILURE = "failure"


def cleanup(ctx: StageContext, statistic: str = "job_stage_cleanup") -> CleanupOutcome:
    """The job commit's cleanup runs inside the shared `cleanup` stage (job/stages.py), which
    times and logs it; abort's is a stage of its own."""
    return _abort_cleanup(ctx) if statistic == "job_stage_abort" else _run(ctx)


def _run(ctx: StageContext) -> CleanupOutcome:
    if ctx.config.cleanup_skipped:
        return CleanupOutcome.DISABLED
    if ctx.store.capabilities.tree_delete:
        return _delete_tree(ctx)
    if not ctx.store.exists(ctx.layout.job_dir):
        _remove_empty_pending_dir(ctx)
        return CleanupOutcome.NOTHING_TO_CLEAN_UP
    outcome = CleanupOutcome.DELETED
    try:
        if ctx.config.cleanup_parallel_delete:
            try:
                attempts = [s.path for s in ctx.store.list(ctx.layout.tasks_dir)]
            except StoreError:
                attempts = []
            # not adaptive: a recursive delete is kernel work that runs well in parallel
            ctx.pool.for_each(lambda p: ctx.store.delete(p, recursive=True), attempts)
            outcome = CleanupOutcome.PARALLEL_DELETE
        ctx.store.delete(ctx.layout.job_dir, recursive=True)
        _remove_empty_pending_dir(ctx)
    except StoreError:
        if not ctx.config.cleanup_failures_ignored:
            raise
        return CleanupOutcome.FAILURE
    return outcome


def _delete_tree(ctx: StageContext) -> CleanupOutcome:
    """The job's directory in one request (the store deletes the tree whole)."""
    try:
        deleted = ctx.store.delete(ctx.layout.job_dir, recursive=True)
        _remove_empty_pending_dir(ctx)
    except StoreError:
        if not ctx.config.cleanup_failures_ignored:
            raise
        return CleanupOutcome.FAILURE
    return CleanupOutcome.DELETED if deleted else CleanupOutcome.NOTHING_TO_CLEAN_UP


def _remove_empty_pending_dir(ctx: StageContext) -> None:
    try:
        ctx.store.delete(PENDING_DIR, recursive=False)
    except StoreError:
        pass  # another job's directories are in it


_abort_cleanup = stage("job_stage_abort", "abort")(_run)
