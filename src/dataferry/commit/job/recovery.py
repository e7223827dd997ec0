"""Recovering a job: finish its decided commit from the intent record, or undo it; and the
claim's dead holder, which a job that finds it recovers before it takes over.

    recover_job:        rolled forward (an intent record) or rolled back (none)
    recover_claim:      the same for the holder named by a dead claim
    acquire_for_job:    hold the destination for a job, recovering a dead holder first

Every decision is logged at WARNING (`dataferry.commit`): an operator sees each roll forward,
roll back, takeover and commit that cannot be finished yet.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from ...errors import (
    CommitError,
    CommitUndone,
    DestinationClaimed,
    InjectedCrash,
    JobCommitError,
    StoreError,
)
from ...store import Store
from ..lookup import committer_by_name, job_from_ids
from ..protocol import CommitterHooks, JobContext, plan_type_of
from ..records.claim import DEFAULT_CLAIM_TIMEOUT_S, MIN_CLAIM_TIMEOUT_S, Claim
from ..records.drivers import remove_dead_driver
from ..records.hold import (
    HeldClaim,
    Judge,
    acquire_claim,
    current_fence,
    mark_crashed,
    observe_claim,
    release_claim,
    take_over,
)
from ..records.intent import DamagedRecord, Intent, load_intent
from . import vouch
from .finish import finish_commit

log = logging.getLogger("dataferry.commit")


def job_claim(committer: CommitterHooks, job: JobContext) -> Claim:
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


def acquire_for_job(committer: CommitterHooks, job: JobContext, wait_s: float) -> HeldClaim:
    """Hold the destination for the job; a dead holder found there is recovered first."""
    return acquire_claim(
        committer.store,
        job_claim(committer, job),
        wait_s=wait_s,
        timeout_s=committer.claim_timeout_s,
        recover=lambda dead, _held: recover_claim(committer.store, dead),
    )


def _decided(
    committer: CommitterHooks, job: JobContext, rollback: bool, vouched: str = ""
) -> tuple[Intent | None, str]:
    """The job's intent record if recovery finishes it (None: recovery settles the job by its
    committer's rollback) and the way it goes ('rolled forward' or 'rolled back'). A damaged
    record is settled from the destination when it can say whether the commit is in it. A
    record no real driver vouches for (`vouch.py`) raises JobCommitError: never finished."""
    try:
        intent = load_intent(committer.store, committer.job_dir(job), plan_type_of(committer))
    except DamagedRecord as e:
        landed = committer.landed_in_destination(job)
        if landed is None:
            raise
        way = "rolled forward" if landed else "rolled back"
        log.warning(
            "job %s: %s; its commit is %sin %s, as the destination says: %s",
            job.job_id,
            e,
            "" if landed else "not ",
            committer.store.full_url(),
            way,
        )
        return None, way
    if intent is not None and intent.job_uuid != job.job_uuid:
        intent = None  # another job's (v1 jobs share one attempt directory): not ours to touch
    if intent is None or (rollback and committer.can_undo_decided):
        return None, "rolled back"
    try:
        vouch.check_vouched(committer, job, intent, vouched)
    except JobCommitError as e:
        log.warning("%s", e)
        raise
    return intent, "rolled forward"


def recovery_way(
    committer: CommitterHooks, job: JobContext, rollback: bool = False, vouched: str = ""
) -> str:
    """What `recover_job` would do, changing nothing: 'rolled forward' or 'rolled back' (what
    `dataferry cleanup --dry-run` says). Raises DamagedRecord (and refuses a record nothing
    vouches for) as recovery would."""
    return _decided(committer, job, rollback, vouched)[1]


def recover_job(
    committer: CommitterHooks, job: JobContext, rollback: bool = False, vouched: str = ""
) -> str:
    """Finish a job's interrupted commit from its intent record ('rolled forward'), or undo the
    job when it has none ('rolled back'). Raises, leaving everything in place, when a decided
    commit cannot be finished, or when nothing vouches that a real driver decided it (`vouched`:
    what the caller knows vouches for it, e.g. the dead claim it recovers; else the
    destination's claim or the job's driver record must name the job, `vouch.py`). A damaged
    record whose commit the destination holds (a table's log) is settled by the rollback,
    which keeps what is committed ('rolled forward')."""
    intent, way = _decided(committer, job, rollback, vouched)
    where = committer.store.full_url(committer.job_dir(job))
    if intent is not None:
        log.warning("job %s: rolling forward its decided commit from %s", job.job_id, where)
        try:
            _under_claim(committer, job, lambda: _finish_recovered(committer, job, intent))
        except CommitUndone as e:  # its committer took the decision back: undo the job
            log.warning("job %s: its decided commit was taken back (%s)", job.job_id, e)
            way = "rolled back"
        else:
            log.warning("job %s: rolled forward", job.job_id)
            return "rolled forward"
    committer.rollback_job(job)
    release_claim(committer.store, job.job_uuid)
    log.warning("job %s: %s (no decided commit to finish in %s)", job.job_id, way, where)
    return way


def _finish_recovered(committer: CommitterHooks, job: JobContext, intent: Intent) -> None:
    ctx = committer.stage_context(job)
    ctx.resumed = True
    try:
        finish_commit(committer, ctx, job, intent)
    except CommitError:
        raise
    except Exception as e:
        log.warning("job %s: cannot finish its decided commit yet: %s", job.job_id, e)
        raise JobCommitError(
            f"job {job.job_id}: cannot finish its decided commit yet (stage "
            f"{ctx.last_stage}): {e}; its directory {committer.job_dir(job)} is left in place"
        ) from e
    finally:
        ctx.close()


def _under_claim(committer: CommitterHooks, job: JobContext, finish: Callable[[], None]) -> None:
    """Run `finish` (changing what readers see) holding the destination's claim: the one a
    takeover or cleanup holds already, else the job's own (its abandoned claim is taken back
    at once). A destination another live job holds is left to that job."""
    if current_fence.get() is not None or not job.claim:
        finish()
        return
    try:
        held = acquire_for_job(committer, job, wait_s=0.0)
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


def claim_job(store: Store, dead: Claim) -> tuple[CommitterHooks, JobContext]:
    """The committer and job of a claim's holder, rebuilt from the claim."""
    committer = committer_by_name(dead.committer, store)
    return committer, job_from_ids(committer, dead.job_id, dead.job_uuid, dead.attempt)


def recover_claim(store: Store, dead: Claim, rollback: bool = False) -> str:
    """Finish (or roll back) the commit of a claim holder that died; the claim stays for the
    caller to remove, the job's driver record (dead too) goes once the job is settled, as
    cleanup's would. Raises, leaving everything in place (the driver record too: it vouches
    for the decided commit), when it cannot be finished."""
    committer, job = claim_job(store, dead)
    # the dead claim names the job: it vouches for the job's intent record
    outcome = recover_job(committer, job, rollback=rollback, vouched=vouch.CLAIM)
    remove_dead_driver(store, dead.job_uuid, Judge(store, MIN_CLAIM_TIMEOUT_S))
    log.warning(
        "destination %s: %s the commit of dead %s", store.full_url(), outcome, dead.describe()
    )
    return outcome


def _recoverer(name: str) -> Claim:
    return Claim(job_id=name, job_uuid=f"{name}-{uuid.uuid4().hex}", committer="", mode="")


def recover_dead_claim(store: Store, timeout_s: float = DEFAULT_CLAIM_TIMEOUT_S) -> str | None:
    """What a new job does before it starts: if the destination's claim is held by a dead job,
    finish or undo that job's commit and free the destination. Returns what was done."""
    state = observe_claim(store)
    if state is None or not Judge(store, timeout_s).verdict(state).dead:
        return None
    outcome: list[str] = []
    held = take_over(
        store,
        state,
        _recoverer("recovery"),
        Judge(store, timeout_s),
        lambda dead, _held: outcome.append(recover_claim(store, dead)),
    )
    if held is None:
        return None
    held.release()
    return outcome[0] if outcome else "removed a damaged claim"
