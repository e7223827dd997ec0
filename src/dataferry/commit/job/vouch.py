"""Who vouches for a decided commit: recovery finishes an intent record only for a job that a
real driver is known to have run.

Finishing an intent record deletes what it lists (an overwrite's `replace`, a conflict mode's
replaced files) and moves what it names, on the record's word. Anyone who can write into the
destination's storage can write one into a made-up job's directory under `_dataferry/`, and an
overwrite's record legitimately lists committed files, so the record cannot vouch for itself.
A real driver writes, before its intent record, records that name its job and stay until its
commit is finished:

    the destination's claim     `_dataferry/claim.json`, taken before the plan; a dead or
                                abandoned holder's claim stays until its commit is recovered
    its driver record           `_dataferry/drivers/<job uuid>.json`, from job setup on (the
                                engines' jobs; a caller of the committer hooks alone has only
                                the claim); kept by cleanup while the job's commit is left

So recovery finishes a decided commit when the job's own driver asks (its abort), the claim
being recovered names the job, or the claim or a driver record in the destination names the
job and its committer. Any other record is left in place with nothing deleted, reported at
WARNING; `dataferry cleanup DEST --give-up ENTRY` moves it aside.
"""

from __future__ import annotations

from ...errors import JobCommitError
from ...store import Store
from ..protocol import CommitterHooks, JobContext
from ..records.claim import Claim, observe_record, read_claim
from ..records.drivers import driver_path
from ..records.intent import Intent, intent_path

OWN_DRIVER = "its own driver"
CLAIM = "the destination's claim"


def _names(record: Claim | None, job_uuid: str, committer: str) -> bool:
    return record is not None and record.job_uuid == job_uuid and record.committer == committer


def voucher(store: Store, committer: CommitterHooks, job: JobContext) -> str:
    """What in the destination vouches that a real driver ran `job` ('' : nothing): the
    destination's claim, or the job's driver record, naming the job and its committer."""
    return vouched_by(store, committer.name, job.job_uuid)


def vouched_by(store: Store, committer: str, job_uuid: str) -> str:
    """`voucher` for a job known by its uuid alone (another job's, as a Delta group's leader
    meets it in a commit request)."""
    if _names(read_claim(store), job_uuid, committer):
        return CLAIM
    state = observe_record(store, driver_path(job_uuid))
    if state is not None and _names(state.claim, job_uuid, committer):
        return "its driver record"
    return ""


def check_vouched(committer: CommitterHooks, job: JobContext, intent: Intent, by: str) -> str:
    """What vouches for the job's decided commit (`by`, given by a caller that knows, else
    found in the destination); JobCommitError naming the record and the way out if nothing
    does: a forged record, or one whose job's records were removed by hand."""
    by = by or voucher(committer.store, committer, job)
    if by:
        return by
    where = committer.store.full_url(intent_path(committer.job_dir(job)))
    raise JobCommitError(
        f"job {job.job_id}: its intent record {where} (mode {intent.mode}, "
        f"{len(intent.replace)} entries to replace) is not vouched for: neither the "
        "destination's claim nor a driver record names the job, which every real driver "
        "writes before its intent record, so it may be forged; not finished, nothing was "
        "deleted or moved, and its directory is left in place (give it up by name with "
        "`dataferry cleanup --give-up`, which moves it aside)"
    )
