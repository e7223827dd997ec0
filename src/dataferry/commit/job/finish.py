"""Everything a job commit does after its intent record, from the record alone: the same code
finishes a commit that is running and one that died (recovery runs it too)."""

from __future__ import annotations

from ..protocol import CommitterHooks, JobCommitResult, JobContext, StageContext
from ..records.intent import Intent
from .stages import cleanup_stage, replace_existing, save_success


def finish_commit(
    committer: CommitterHooks, ctx: StageContext, job: JobContext, intent: Intent
) -> JobCommitResult:
    """Everything after the intent record, from the record alone: the same code finishes a
    commit that is running and one that died."""
    job_dir = committer.job_dir(job)
    committer.check_intent(ctx, job, intent)  # a damaged plan must not replace anything
    replaced = replace_existing(ctx, job_dir, intent)
    applied = committer.apply_commit(ctx, job, intent)
    ctx.stats.set_counter("committer_files_committed", applied.files)
    ctx.stats.set_counter("committer_bytes_committed", applied.bytes)
    success_path = None
    data = committer.success_bytes(ctx, job, intent, applied)
    if data is not None:
        success_path = save_success(ctx, job_dir, data)
    outcome = cleanup_stage(ctx, committer, job)
    return JobCommitResult(
        job_id=str(job.job_id),
        committer=committer.name,
        files=applied.files,
        bytes=applied.bytes,
        success_path=success_path,
        stage_seconds=dict(ctx.stage_seconds),
        iostatistics=ctx.stats,
        filenames=[ctx.store.relative_path(f) if "://" in f else f for f in applied.filenames],
        details={"cleanup": outcome, "replaced": replaced, **applied.details},
    )
