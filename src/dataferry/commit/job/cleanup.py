"""`dataferry cleanup DEST`: finish or undo what dead jobs left in a destination.

A live job is never touched. Cleanup takes the destination's claim (recovering a dead holder's
commit first), then asks each committer, through its hooks by the registry, for the
directories its jobs left (`leftovers`) and recovers each one (`recover_leftover`) whose job is
known dead or is old enough not to be running: a decided commit (it saved its intent record) is
rolled forward to the result an uninterrupted commit gives, any other is rolled back. A commit
that cannot be finished (a file it must move has vanished, its intent record cannot be read) is
left in place and reported, so nothing is deleted that cannot be put back; the operator may then
give it up by name (`give_up`, `giveup.py`). Multipart uploads no job names any more are
aborted by age, as S3A purges them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from ...errors import CommitError, NotFound, StoreError
from ...ids import new_job_id
from ...store import Store
from ..lookup import committer_by_name
from ..protocol import Leftover
from ..protocol.inflight import published_name
from ..records.claim import CLAIM_FILE, FENCE_PREFIX, MIN_CLAIM_TIMEOUT_S, Claim, ClaimState
from ..records.drivers import Drivers, fence_driver
from ..records.hold import (
    HeldClaim,
    Judge,
    claim_files,
    current_fence,
    observe_claim,
    remove_empty_claim_dir,
    take_over,
)
from ..records.intent import load_intent
from ..registry import committer_classes
from .giveup import give_up_entry
from .recovery import _recoverer, claim_job, recover_claim, recovery_way

log = logging.getLogger("dataferry.commit")
CLAIM_PATH = CLAIM_FILE


@dataclass
class RecoveryReport:
    found: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rolled_forward: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    skipped_recent: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # path -> why it was left in place
    uploads_aborted: list[str] = field(default_factory=list)  # keys of orphaned uploads
    left: dict[str, str] = field(default_factory=dict)  # path -> why it was left alone
    # a dry run's word for each entry the real run would recover: "rolled forward" (its commit
    # was decided: the intent record is there) or "rolled back"
    planned: dict[str, str] = field(default_factory=dict)
    # the job's data files each recovered entry held (named in flight, `protocol/inflight.py`):
    # published when it is rolled forward, removed when it is rolled back
    files: dict[str, int] = field(default_factory=dict)
    # entries whose commit could not be finished and that the operator gave up by name: path
    # -> where the job's directory is kept (a dry run: path -> what recovery failed on)
    given_up: dict[str, str] = field(default_factory=dict)


def _newest_mtime(store: Store, path: str) -> float | None:
    """When anything under `path` was last written; None when the store gave no time for one
    of its files (such a leftover is never judged old: nothing is removed on a guess). A
    directory's own time counts where there is one (an object store's prefix has none)."""
    times = [s.mtime for s in store.walk(path)]
    if any(t is None for t in times):
        return None
    try:
        own = store.stat(path).mtime
    except NotFound:
        own = None
    known = [t for t in (*times, own) if t is not None]
    return max(known) if known else 0.0


def cleanup_destination(
    store: Store,
    *,
    older_than_s: float = 3600.0,
    rollback: bool = False,
    dry_run: bool = False,
    give_up: Collection[str] = (),
) -> RecoveryReport:
    """Finish or undo every dead job's commit in the destination and remove what it left.

    A live job is never touched, whatever `older_than_s` says: while the destination's claim
    is held by a live holder (judged as a taker judges it: its process, its lease by the
    store's clock), everything is reported and left. Otherwise cleanup takes the claim itself,
    so no commit starts while it works, recovers a dead holder's commit, then every leftover
    older than `older_than_s`. A damaged claim counts as dead once it is `older_than_s` old.
    A commit that cannot be finished is reported in `failed` and left as is, unless its entry
    is named in `give_up`: then the destination stays as the commit left it and the job's
    directory is moved aside (`giveup.py`), reported in `given_up`."""
    report = RecoveryReport()
    give_up = frozenset(give_up)
    state = observe_claim(store)
    judge = Judge(store, MIN_CLAIM_TIMEOUT_S, damaged_lease_s=older_than_s)
    if state is not None:
        report.found.append(CLAIM_PATH)
        verdict = judge.verdict(state)
        if not verdict.dead:
            why = f"held by live {state.describe()}: {verdict.why}"
            if state.claim is None:  # nobody renews it: only its age lets it go
                why = (
                    f"{state.describe()}: {verdict.why}; it is removed once it is "
                    f"{older_than_s:.0f} s old (`--older-than 0` removes it now)"
                )
            _leave(report, CLAIM_PATH, why)
            _leave_all(store, report, why)
            return report
    drivers = Drivers(store, judge)
    if dry_run:
        if state is not None and state.claim is not None:
            where = state.claim.job_dir or CLAIM_PATH
            _plan(report, where, lambda: recovery_way(*claim_job(store, state.claim), rollback))
            if where != CLAIM_PATH and where in report.planned:
                report.planned[CLAIM_PATH] = report.planned[where]
        _survey(store, report, older_than_s, drivers, rollback)
        for path in give_up & set(report.failed):
            report.given_up[path] = report.failed.pop(path)
        return report
    if state is None and not drivers and not _anything_left(store):
        remove_empty_claim_dir(store)  # a release that died between its deletes
        report.uploads_aborted = abort_orphaned_uploads(store, older_than_s, time.time())
        return report
    held = _hold_for_cleanup(store, state, judge, rollback, report, give_up)
    if held is None:
        return report
    token = current_fence.set(held.check)
    try:
        _recover_leftovers(store, report, older_than_s, rollback, drivers, give_up)
        for cls in committer_classes():
            cls.tidy(store)
        _remove_claim_debris(store, held)
    finally:
        current_fence.reset(token)
        held.release()
    remove_empty_claim_dir(store)  # a release that died between its two deletes
    report.uploads_aborted = abort_orphaned_uploads(store, older_than_s, time.time(), dry_run)
    return report


def _hold_for_cleanup(
    store: Store,
    state: ClaimState | None,
    judge: Judge,
    rollback: bool,
    report: RecoveryReport,
    give_up: Collection[str] = (),
) -> HeldClaim | None:
    """Take the destination's claim for cleanup: from a dead holder (recovering its commit) or
    fresh. None (with the reason in the report) when a job got there first."""
    me = _recoverer("cleanup")
    if state is None:
        if store.create_if_absent(CLAIM_PATH, me.to_bytes()):
            return HeldClaim(store, me)
        state = observe_claim(store)
        why = f"a job claimed the destination as cleanup began ({state and state.describe()})"
        _leave_all(store, report, why)
        return None
    where = state.claim.job_dir if state.claim is not None and state.claim.job_dir else CLAIM_PATH
    if where != CLAIM_PATH:
        report.files[where] = _job_files(store, where)
    outcome: list[str] = []

    def recover(dead: Claim, _held: HeldClaim) -> None:
        try:
            outcome.append(recover_claim(store, dead, rollback=rollback))
        except (CommitError, StoreError) as e:
            if where == CLAIM_PATH or where not in give_up:
                raise
            _give_up(store, report, where, str(e))  # holding the claim, fenced
            outcome.append("given up")

    try:
        held = take_over(store, state, me, judge, recover)
    except (CommitError, StoreError) as e:
        report.failed[where] = str(e)
        if where != CLAIM_PATH:
            _leave(report, CLAIM_PATH, f"kept for the commit of {where}, which cannot be finished")
        _leave_all(store, report, f"the dead holder's commit could not be finished: {e}")
        return None
    if held is None:
        _leave_all(store, report, "another job is taking over the destination's claim")
        return None
    if state.claim is None:
        report.removed.append(CLAIM_PATH)
        log.warning("destination %s: removed %s", store.full_url(), state.describe())
    elif outcome:  # the claim's row says which way its holder's commit went, as the job's does
        if where not in report.found:
            report.found.append(where)
        _record(report, where, outcome[0])
        _record(report, CLAIM_PATH, outcome[0])
        report.removed.append(CLAIM_PATH)
    return held


def _anything_left(store: Store) -> bool:
    return bool(claim_files(store)) or any(cls.leftovers(store) for cls in committer_classes())


def _leave_all(store: Store, report: RecoveryReport, why: str) -> None:
    for cls in committer_classes():
        for left in _leftovers_of(cls, store, report):
            _leave(report, left.path, why)


def _leftovers_of(cls: type, store: Store, report: RecoveryReport) -> list[Leftover]:
    found = []
    for left in cls.leftovers(store):
        if left.path not in report.found:
            report.found.append(left.path)
            found.append(left)
    return found


def _why_left(
    store: Store, left: Leftover, drivers: Drivers, now: float, older_than_s: float
) -> str:
    """Why cleanup must leave a leftover alone ('' : recover it). A live driver keeps its
    job's leftovers whatever the age; a driver known dead gives its job's up at once; the age
    rule is only for jobs of unknown state."""
    why = drivers.why_left(left.job_uuid)
    if why or drivers.known_dead(left.job_uuid):
        return why
    if older_than_s <= 0:
        return ""
    newest = _newest_mtime(store, left.path)
    if newest is None:
        return "its age is unknown (the store gives no modification time)"
    if now - newest < older_than_s:
        return f"changed within {older_than_s:.0f} s"
    return ""


def _plan(report: RecoveryReport, path: str, way: Callable[[], str]) -> None:
    """A dry run's word for `path`: the way recovery would go, or why it would fail."""
    try:
        report.planned[path] = way()
    except (CommitError, StoreError) as e:
        report.failed[path] = str(e)


def _survey(
    store: Store, report: RecoveryReport, older_than_s: float, drivers: Drivers, rollback: bool
) -> None:
    """A dry run: what the real run would do with each leftover (roll it forward or back, or
    leave it, and why), decided by recovery's own rule (`recovery_way`)."""

    def plan(cls: type, left: Leftover) -> None:
        committer = committer_by_name(left.committer, store)
        job = committer.new_job(new_job_id(job_uuid=left.job_uuid), attempt=left.attempt)
        _plan(report, left.path, lambda: recovery_way(committer, job, rollback))

    _each_leftover(store, report, older_than_s, drivers, act=plan)


def _recover_leftovers(
    store: Store,
    report: RecoveryReport,
    older_than_s: float,
    rollback: bool,
    drivers: Drivers,
    give_up: Collection[str] = (),
) -> None:
    kept: set[str] = set()  # jobs whose commit is left: their driver records vouch for them

    def recover(cls: type, left: Leftover) -> None:
        try:
            if drivers.known_dead(left.job_uuid):  # before its intent is read: `drivers.py`
                fence_driver(store, left.job_uuid)
            what = cls.recover_leftover(store, left, rollback=rollback)
        except (CommitError, StoreError) as e:
            if left.path in give_up:
                _give_up(store, report, left.path, str(e))
            else:
                report.failed[left.path] = str(e)
                kept.add(_job_of(store, left))
            return
        _record(report, left.path, what)
        report.removed.append(left.path)

    _each_leftover(store, report, older_than_s, drivers, act=recover)
    drivers.remove_dead(keep=kept)


def _job_of(store: Store, left: Leftover) -> str:
    """The job a leftover belongs to: named by it, or by its intent record (Hive's staging
    directories name no job); '' when neither says."""
    if left.job_uuid:
        return left.job_uuid
    try:
        intent = load_intent(store, left.path)
    except (CommitError, StoreError):
        return ""
    return intent.job_uuid if intent is not None else ""


def _each_leftover(
    store: Store,
    report: RecoveryReport,
    older_than_s: float,
    drivers: Drivers,
    act: Callable[[type, Leftover], None] | None,
) -> None:
    """Every committer's leftovers once: each one cleanup must leave is reported with why;
    `act` is done with each of the others (recover it, or, in a dry run, say how it would)."""
    now = time.time()
    for cls in committer_classes():
        for left in _leftovers_of(cls, store, report):
            why = _why_left(store, left, drivers, now, older_than_s)
            if why:
                _leave(report, left.path, why)
            elif act is not None:
                report.files[left.path] = _job_files(store, left.path)
                act(cls, left)


def _give_up(store: Store, report: RecoveryReport, path: str, why: str) -> None:
    """Give up the commit of `path` (named by the operator; its recovery failed on `why`),
    under the claim cleanup holds: checked first, as every visible step is."""
    fence = current_fence.get()
    if fence is not None:
        fence(f"giving up the commit of {path}")
    report.given_up[path] = give_up_entry(store, path, why) or path
    report.failed.pop(path, None)


def _job_files(store: Store, path: str) -> int:
    """How many of the job's data files a leftover holds (its records are not counted)."""
    return sum(1 for st in store.walk(path) if published_name(st.path) != st.path)


def _leave(report: RecoveryReport, path: str, why: str) -> None:
    report.left.setdefault(path, why)
    report.skipped_recent.append(path)


def _remove_claim_debris(store: Store, held: HeldClaim) -> None:
    """Fences and clock probes that no claim needs any more (their takers and judges died):
    while cleanup holds the claim, no other generation is current, so every other fence goes."""
    own = f"{FENCE_PREFIX}{held.claim.generation}."
    for st in claim_files(store):
        if not st.name.startswith(own):
            try:
                store.delete(st.path)
            except StoreError:
                pass


def abort_orphaned_uploads(
    store: Store, older_than_s: float, now: float, dry_run: bool = False
) -> list[str]:
    """Abort uploads pending in the destination that no job's directory names any more: an
    attempt that was cut off from its job (a zombie) can start one after its job cleaned up.
    Only when no job of an upload committer is left in the destination, and only uploads
    older than `older_than_s` (S3A purges by age the same way), so a running job loses none."""
    if not store.capabilities.multipart_upload:
        return []
    if any(cls.starts_uploads and cls.leftovers(store) for cls in committer_classes()):
        return []
    doomed = [u for u in store.list_uploads("") if now - u.initiated >= older_than_s]
    if not dry_run:
        for u in doomed:
            try:
                store.abort_upload(u.path, u.upload_id)
            except NotFound:
                pass
    return [u.path for u in doomed]


def _record(report: RecoveryReport, path: str, what: str) -> None:
    log.warning("cleanup: %s %s", what, path)
    if what == "rolled forward":
        report.rolled_forward.append(path)
    elif what == "rolled back":
        report.rolled_back.append(path)


@dataclass
class UploadsReport:
    pending: list = field(default_factory=list)
    aborted: list = field(default_factory=list)


def abort_uploads(
    store: Store, *, older_than_s: float = 0.0, dry_run: bool = False
) -> UploadsReport:
    """Abort multipart uploads pending under the store's root that are older than the limit."""
    now = time.time()
    report = UploadsReport(pending=pending_uploads(store))
    for u in report.pending:
        if now - u.initiated >= older_than_s:
            if not dry_run:
                store.abort_upload(u.path, u.upload_id)
            report.aborted.append(u)
    if not dry_run:
        for record in spent_records(report.pending, report.aborted):
            store.delete(record)
    return report


def spent_records(pending: list, aborted: list) -> list[str]:
    """The records (`records` of sessions a store cannot list, GCS's) every session of which
    was aborted: they go too, so a later listing shows none of them; a record that also names
    a session kept (too recent) stays."""
    done = {id(u) for u in aborted}
    kept = {r for u in pending if id(u) not in done for r in getattr(u, "records", ())}
    return sorted({r for u in aborted for r in getattr(u, "records", ())} - kept)


def pending_uploads(store: Store) -> list:
    """Uploads pending under the store's root: as the store lists them, or where it cannot
    (GCS's sessions) as the records of the committers that started them name them."""
    if store.lists_uploads:
        return store.list_uploads("")
    return [
        u for cls in committer_classes() if cls.starts_uploads for u in cls.recorded_uploads(store)
    ]
