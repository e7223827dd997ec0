"""One job commit for every committer: claim, plan, decide, finish; and its recovery.

    claim_destination -> [committer: plan stages] -> check_write_mode -> save_intent
    -> finish: replace_existing -> [committer: apply stages] -> save_success -> cleanup
       -> release the claim

Nothing a reader sees changes before `save_intent`; from there on `finish_commit` is the whole
rest of the commit, and it is also what recovery runs for a commit that died: each of its stages
is idempotent and works from the intent record alone, so the finished result is the same as an
uninterrupted commit's. A job with no intent record is rolled back by its committer instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import (
    ClaimLost,
    CommitError,
    DestinationClaimed,
    DestinationError,
    InjectedCrash,
    JobCommitError,
    NotFound,
    StoreError,
)
from ..store import Store, paths
from .claim import (
    MIN_CLAIM_TIMEOUT_S,
    Claim,
    HeldClaim,
    acquire_claim,
    current_fence,
    mark_crashed,
    release_claim,
)
from .drivers import driver_crashed, end_driver, record_driver
from .intent import Intent, load_intent, mark_phase, phase_done, save_intent
from .stages import StageContext, stage
from .success import SUCCESS_FILE

if TYPE_CHECKING:
    from .protocol import Committer, JobCommitResult, JobContext, TaskCommitMessage

REPLACED_PHASE = "replaced"
log = logging.getLogger("dataferry.commit")


@dataclass
class CommitPlan:
    """What a committer's planning stages decided; nothing visible has changed yet.
    `payload` goes into the intent record: apply works from it alone."""

    payload: dict[str, Any]
    files: int = 0
    bytes: int = 0


@dataclass
class Applied:
    """What a committer's apply stages did (files committed, and its own counters)."""

    files: int = 0
    bytes: int = 0
    filenames: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


# --- the stages every committer shares --------------------------------------------------------


@stage("job_stage_claim_destination", "claim")
def claim_destination(ctx: StageContext, committer: Committer, job: JobContext) -> HeldClaim:
    """Own the destination for this commit. `append` waits for another live commit to finish;
    `error` and `overwrite` give way at once, naming the holder."""
    timeout = committer.claim_timeout_s
    held = _acquire(committer, job, wait_s=timeout if job.mode == "append" else 0.0)
    ctx.fence = held.check
    return held


def job_claim(committer: Committer, job: JobContext) -> Claim:
    """The claim record naming this job and this process (also its driver record's shape)."""
    return Claim(
        job_id=str(job.job_id),
        job_uuid=job.job_uuid,
        committer=committer.name,
        mode=job.mode,
        job_dir=committer.job_dir(job),
        attempt=job.attempt,
        lease_s=max(committer.claim_timeout_s, MIN_CLAIM_TIMEOUT_S),
    )


def _acquire(committer: Committer, job: JobContext, wait_s: float) -> HeldClaim:
    """Hold the destination for the job; a dead holder found there is recovered first."""
    from .recovery import recover_claim

    return acquire_claim(
        committer.store,
        job_claim(committer, job),
        wait_s=wait_s,
        timeout_s=committer.claim_timeout_s,
        recover=lambda dead, _held: recover_claim(committer.store, dead),
    )


@stage("job_stage_check_write_mode", "check_write_mode")
def check_write_mode(
    ctx: StageContext, committer: Committer, job: JobContext, plan: CommitPlan
) -> list[str]:
    """Decide the write mode against the destination as it is now (we hold its claim):
    `error` refuses existing data, `overwrite` returns the entries it replaces. A symbolic
    link among the destination's entries is refused here, before the commit is decided: the
    store would refuse to publish through it only after `overwrite` deleted the earlier data."""
    refuse_linked_entries(ctx.store)
    if job.mode == "append":
        return []
    existing = committer.existing_data(job, plan)
    if job.mode == "error":
        if existing:
            raise DestinationError(
                f"destination {ctx.store.full_url()} is not empty (it holds {len(existing)} "
                f"entries, e.g. {existing[0]!r}); write with mode='append' or mode='overwrite'"
            )
        return []
    return existing


@stage("job_stage_save_intent", "save_intent")
def save_intent_stage(ctx: StageContext, job_dir: str, intent: Intent) -> str:
    """Decide the commit. The claim is checked before and after: a job overtaken just then
    stops, and its intent (if written) is the new holder's to finish."""
    ctx.fence("saving the intent record")
    path = save_intent(ctx.store, job_dir, intent)
    ctx.fence("replacing existing data")
    return path


@stage("job_stage_replace_existing", "replace_existing")
def replace_existing(ctx: StageContext, job_dir: str, intent: Intent) -> int:
    """Delete what the write mode replaces, once: after this phase new files move in, and a
    resumed commit must not delete them."""
    if not intent.replace or phase_done(ctx.store, job_dir, REPLACED_PHASE):
        return 0
    ctx.fence("replacing existing data")
    ctx.pool.for_each(lambda p: ctx.store.delete(p, recursive=True), intent.replace, adaptive=True)
    mark_phase(ctx.store, job_dir, REPLACED_PHASE)
    ctx.stats.incr("committer_entries_replaced", len(intent.replace))
    return len(intent.replace)


@stage("job_stage_save_success_marker", "save_success")
def save_success(ctx: StageContext, job_dir: str, data: bytes) -> str:
    """Replace `_SUCCESS` in one step: renamed into place where rename is atomic, else one PUT
    (atomic on object stores)."""
    ctx.fence(f"writing {SUCCESS_FILE}")
    if ctx.store.capabilities.atomic_file_rename:
        tmp = paths.join(job_dir, f"{SUCCESS_FILE}.tmp")
        ctx.store.write_bytes(tmp, data)
        ctx.store.delete(SUCCESS_FILE)
        ctx.store.rename(tmp, SUCCESS_FILE)
    else:
        ctx.store.write_bytes(SUCCESS_FILE, data)
    return SUCCESS_FILE


@stage("job_stage_cleanup", "cleanup")
def cleanup_stage(ctx: StageContext, committer: Committer, job: JobContext) -> str:
    return committer.remove_job_dir(ctx, job)


# --- the job commit, and its finishing half -------------------------------------------------


def commit_job(
    committer: Committer, job: JobContext, messages: Sequence[TaskCommitMessage]
) -> JobCommitResult:
    """The job commit of every committer (see the module docstring)."""
    committer.check_messages(job, messages)
    ctx = committer.stage_context(job)
    start = time.perf_counter()
    held: HeldClaim | None = None
    decided = False
    try:
        with ctx.stats.duration("committer_commit_job"):
            if job.claim:
                held = claim_destination(ctx, committer, job)
            plan = committer.plan_commit(ctx, job, messages)
            replace = check_write_mode(ctx, committer, job, plan)
            intent = Intent(
                job_id=str(job.job_id),
                job_uuid=job.job_uuid,
                committer=committer.name,
                mode=job.mode,
                payload=plan.payload,
                replace=replace,
            )
            save_intent_stage(ctx, committer.job_dir(job), intent)
            decided = True
            result = finish_commit(committer, ctx, job, intent)
            if held is not None:
                held.release()
            end_driver(ctx.store, job.job_uuid)
    except Exception as e:
        lost = isinstance(e, ClaimLost) or (held is not None and bool(held.lost))
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


def _let_go(held: HeldClaim, abandon: bool) -> None:
    """Release (undecided) or abandon (decided) the claim after a failed commit; a failure to
    do so is logged, never raised over the error that failed the commit."""
    try:
        held.abandon() if abandon else held.release()
    except StoreError as e:
        log.warning(
            "could not %s the claim on %s: %s",
            "abandon" if abandon else "release",
            held.store.full_url(),
            e,
        )


def _finish_again(
    committer: Committer, job: JobContext, intent: Intent, held: HeldClaim | None
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
            held.release()
        end_driver(ctx.store, job.job_uuid)
    except Exception:
        return None
    finally:
        ctx.close()
    committer.stats.incr("committer_commit_job_resumed")
    return result


def finish_commit(
    committer: Committer, ctx: StageContext, job: JobContext, intent: Intent
) -> JobCommitResult:
    """Everything after the intent record, from the record alone: the same code finishes a
    commit that is running and one that died."""
    from .protocol import JobCommitResult

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


def recover_job(committer: Committer, job: JobContext, rollback: bool = False) -> str:
    """Finish a job's interrupted commit from its intent record ('rolled forward'), or undo the
    job when it has none ('rolled back'). Raises, leaving everything in place, when a decided
    commit cannot be finished."""
    intent = load_intent(committer.store, committer.job_dir(job))
    if intent is not None and intent.job_uuid != job.job_uuid:
        intent = None  # another job's (v1 jobs share one attempt directory): not ours to touch
    if intent is not None and not (rollback and committer.can_undo_decided):
        _under_claim(committer, job, lambda: _finish_recovered(committer, job, intent))
        return "rolled forward"
    committer.rollback_job(job)
    release_claim(committer.store, job.job_uuid)
    return "rolled back"


def _finish_recovered(committer: Committer, job: JobContext, intent: Intent) -> None:
    ctx = committer.stage_context(job)
    ctx.resumed = True
    try:
        finish_commit(committer, ctx, job, intent)
    except CommitError:
        raise
    except Exception as e:
        raise JobCommitError(
            f"job {job.job_id}: cannot finish its decided commit yet (stage "
            f"{ctx.last_stage}): {e}; its directory {committer.job_dir(job)} is left in place"
        ) from e
    finally:
        ctx.close()


def _under_claim(committer: Committer, job: JobContext, finish: Callable[[], None]) -> None:
    """Run `finish` (changing what readers see) holding the destination's claim: the one a
    takeover or cleanup holds already, else the job's own (its abandoned claim is taken back
    at once). A destination another live job holds is left to that job."""
    if current_fence.get() is not None or not job.claim:
        finish()
        return
    try:
        held = _acquire(committer, job, wait_s=0.0)
    except DestinationClaimed as e:
        raise JobCommitError(
            f"job {job.job_id}: its decided commit is left for the destination's holder: {e}"
        ) from None
    token = current_fence.set(held.check)
    try:
        finish()
    except Exception:
        _let_go(held, abandon=True)  # still decided: the next job or cleanup tries again
        raise
    except InjectedCrash:
        mark_crashed(held)  # the process counts as dead: the claim stays as it is
        raise
    finally:
        current_fence.reset(token)
    held.release()


def record_job_driver(committer: Committer, job: JobContext) -> None:
    """Record the job's driver (this process) in the destination from job setup on, so that
    `dataferry cleanup` leaves a live job alone and recovers a dead one at once; removed when
    the job commits or is aborted (`drivers.py`)."""
    record_driver(committer.store, job_claim(committer, job))


def refuse_linked_entries(store: Store) -> None:
    """DestinationError naming the first top-level entry of the destination (a partition
    directory, `_SUCCESS`, `_dataferry`, `_temporary`) that is a symbolic link."""
    for st in store.list_or_empty(""):
        if st.is_link:
            raise DestinationError(
                f"destination entry {store.full_url(st.path)} is a symbolic link; links are "
                "not followed, so nothing is committed through it (remove it, or point the "
                "job at the directory it links to)"
            )


def visible_entries(committer: Committer) -> list[str]:
    """The destination's top-level entries a reader sees, and a committed job's `_SUCCESS`."""
    try:
        entries = committer.store.list("")
    except NotFound:
        return []
    except StoreError as e:
        raise DestinationError(
            f"destination {committer.store.full_url()} cannot be listed: {e}"
        ) from None
    return sorted(e.path for e in entries if not paths.is_hidden(e.path) or e.path == SUCCESS_FILE)
