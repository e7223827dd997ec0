"""One job commit for every committer: claim, plan, decide, finish.

    claim_destination -> [committer: plan stages] -> check_write_mode -> save_intent
    (where the store's closes are slow, the plan's reading and its intent are written ahead,
    beside the claim: `ahead.py`)
    -> finish: replace_existing -> [committer: apply stages] -> save_success -> cleanup
       -> release the claim

An append into a table whose format commits through the table's own optimistic concurrency
(`holds_claim` False: Iceberg's catalog compare-and-swap) takes no claim: appenders commit side
by side, each rebased and retried by the format. Its fence is then its own driver record: a job
that cleanup judged dead and recovered (its record removed or replaced) stops before it changes
what readers see, as a claim holder whose claim was taken over does.

Nothing a reader sees changes before `save_intent`; from there on `finish_commit` is the whole
rest of the commit, and it is also what recovery runs for a commit that died: each of its stages
is idempotent and works from the intent record alone, so the finished result is the same as an
uninterrupted commit's. A job with no intent record is rolled back by its committer instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from ...errors import ClaimLost, CommitError, CommitUndone, InjectedCrash, JobCommitError
from ...stages import stage
from ..protocol import (
    CommitPlan,
    CommitterHooks,
    JobCommitResult,
    JobContext,
    StageContext,
    TaskCommitMessage,
    plan_type_of,
)
from ..records.drivers import (
    driver_crashed,
    driver_fence,
    driver_path,
    end_driver,
    record_driver,
)
from ..records.hold import HeldClaim, mark_crashed
from ..records.intent import Intent
from .ahead import WrittenAhead
from .finish import finish_commit
from .recovery import _let_go, acquire_for_job, job_claim
from .stages import check_messages, check_write_mode, save_intent_stage

log = logging.getLogger("dataferry.commit")


@stage("job_stage_claim_destination", "claim")
def claim_destination(ctx: StageContext, committer: CommitterHooks, job: JobContext) -> HeldClaim:
    """Own the destination for this commit. `append` waits for another live commit to finish;
    `error` and `overwrite` give way at once, naming the holder."""
    timeout = committer.claim_timeout_s
    held = acquire_for_job(committer, job, wait_s=timeout if job.mode == "append" else 0.0)
    ctx.fence = held.check
    return held


def commit_job(
    committer: CommitterHooks, job: JobContext, messages: Sequence[TaskCommitMessage]
) -> JobCommitResult:
    """The job commit of every committer (see the module docstring)."""
    check_messages(job, messages)
    ctx = committer.stage_context(job)
    start = time.perf_counter()
    held: HeldClaim | None = None
    decided = False
    ahead: WrittenAhead | None = None
    try:
        with ctx.stats.duration("committer_commit_job"):
            ahead = WrittenAhead.start(committer, ctx, job, messages)
            if committer.holds_claim(job):
                held = claim_destination(ctx, committer, job)
            elif job.claim:
                ctx.fence = driver_fence(ctx.store, job.job_uuid)
            if ahead is not None:
                ahead.done()  # the plan reuses what it read
            plan = committer.plan_commit(ctx, job, messages)
            replace = check_write_mode(ctx, committer, job, plan, messages)
            intent = Intent(
                job_id=str(job.job_id),
                job_uuid=job.job_uuid,
                committer=committer.name,
                mode=job.mode,
                payload=checked_plan(committer, plan),
                replace=replace,
            )
            staged = ahead.staged_for(intent) if ahead is not None else None
            save_intent_stage(ctx, committer.job_dir(job), intent, staged)
            decided = True
            result = finish_commit(committer, ctx, job, intent)
            if held is not None:
                held.release(tidy=False)  # end_driver removes the emptied `_dataferry`
            end_driver(ctx.store, job.job_uuid)
    except Exception as e:
        if ahead is not None:
            ahead.wait()
        lost = isinstance(e, ClaimLost) or (held is not None and bool(held.lost))
        if isinstance(e, CommitUndone):
            decided = False  # taken back by the committer: not to be finished, but undone
        if decided and not lost:  # a decided commit is finished, not undone: once more
            retried = _finish_again(committer, job, intent, held)
            if retried is not None:
                return retried
        if held is not None and not lost:
            _let_go(held, abandon=decided)
        committer.commit_failed(ctx, job, e)
        if lost:
            raise ClaimLost(
                f"job {job.job_id}: job commit stopped in stage {ctx.last_stage}: {e}"
                f"{'; its intent record is left for the new holder to finish' if decided else ''}"
            ) from e
        if isinstance(e, CommitError):
            raise
        raise JobCommitError(
            f"job {job.job_id}: job commit failed in stage {ctx.last_stage}"
            f"{' (decided: dataferry cleanup finishes it)' if decided else ''}: {e}"
        ) from e
    except InjectedCrash:
        if held is not None:  # the process counts as dead: the claim stays as it is
            mark_crashed(held)
        driver_crashed(ctx.store, job.job_uuid)
        raise
    finally:
        if held is not None:
            held.stop_heartbeat()
        ctx.close()
    result.stage_seconds["total"] = time.perf_counter() - start
    return result


def checked_plan(committer: CommitterHooks, plan: CommitPlan) -> object:
    """The plan to save: the committer's declared plan type (what recovery decodes it as),
    so a plan_commit that returns anything else fails before the commit is decided."""
    expected = plan_type_of(committer)
    if expected is not None and not isinstance(plan.payload, expected):
        raise CommitError(
            f"committer {committer.name!r} planned a {type(plan.payload).__name__}, not its "
            f"plan type {expected.__name__}; nothing was committed"
        )
    return plan.payload


def _finish_again(
    committer: CommitterHooks, job: JobContext, intent: Intent, held: HeldClaim | None
) -> JobCommitResult | None:
    """A transient failure after the intent record: finish from the record at once (still
    holding the claim), so the caller sees a committed job rather than one waiting for
    `dataferry cleanup`."""
    ctx = committer.stage_context(job)
    ctx.resumed = True
    if held is not None:
        ctx.fence = held.check
    try:
        result = finish_commit(committer, ctx, job, intent)
        if held is not None:
            held.release(tidy=False)  # end_driver removes the emptied `_dataferry`
        end_driver(ctx.store, job.job_uuid)
    except Exception:
        return None
    finally:
        ctx.close()
    committer.stats.incr("committer_commit_job_resumed")
    return result


def record_job_driver(committer: CommitterHooks, job: JobContext) -> JobContext:
    """Record the job's driver (this process) in the destination from job setup on, so that
    `dataferry cleanup` leaves a live job alone and recovers a dead one at once; removed when
    the job commits or is aborted (`drivers.py`). Returns the job as its tasks must see it
    (they check the record when they commit: `job_ended`)."""
    record_driver(committer.store, job_claim(committer, job))
    return replace(job, driver_recorded=True)


def job_ended(job: JobContext) -> bool:
    """True once a job with a driver record has committed or been aborted: its record is gone.
    One request; False for a job that never recorded its driver."""
    return job.driver_recorded and not job.store.exists(driver_path(job.job_uuid))
