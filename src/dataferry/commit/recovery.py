"""Recovering what dead jobs left: the claim's holder first, then every committer's leftovers.

`recover_claim` is what a job that finds a dead holder on the destination runs before it takes
over; `recover_destination` is `dataferry cleanup`: it finishes or undoes a dead claim holder's
commit, then asks each committer (through its hooks, by the registry) for the directories its
jobs left and recovers each one old enough not to belong to a running job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..errors import CommitError, NotFound, StoreError
from ..store import Store
from .claim import (
    CLAIM_FILE,
    DEFAULT_CLAIM_TIMEOUT_S,
    Claim,
    read_claim,
    release_claim,
    remove_empty_claim_dir,
    take_over,
)
from .jobcommit import recover_job
from .protocol import Leftover, committer_by_name, job_from_ids
from .registry import committer_classes


def recover_claim(store: Store, dead: Claim, rollback: bool = False) -> str:
    """Finish (or roll back) the commit of a claim holder that died; the claim stays for the
    caller to remove. Raises, leaving everything in place, when it cannot be finished."""
    committer = committer_by_name(dead.committer, store)
    job = job_from_ids(committer, dead.job_id, dead.job_uuid, dead.attempt)
    return recover_job(committer, job, rollback=rollback)


def recover_dead_claim(store: Store, timeout_s: float = DEFAULT_CLAIM_TIMEOUT_S) -> str | None:
    """What a new job does before it starts: if the destination's claim is held by a dead job,
    finish or undo that job's commit and free the destination. Returns what was done."""
    holder = read_claim(store)
    if holder is None or not holder.is_dead(timeout_s):
        return None
    taker = Claim(job_id="recovery", job_uuid="", committer="", mode="")
    outcome: list[str] = []
    take_over(
        store, holder, taker, timeout_s, lambda dead: outcome.append(recover_claim(store, dead))
    )
    return outcome[0] if outcome else None


@dataclass
class RecoveryReport:
    found: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rolled_forward: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    skipped_recent: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # path -> why it was left in place
    uploads_aborted: list[str] = field(default_factory=list)  # keys of orphaned uploads


def _newest_mtime(store: Store, path: str) -> float:
    times = [s.mtime or 0.0 for s in store.walk(path)]
    try:
        times.append(store.stat(path).mtime or 0.0)
    except NotFound:
        pass
    return max(times) if times else 0.0


def recover_destination(
    store: Store,
    *,
    older_than_s: float = 3600.0,
    rollback: bool = False,
    dry_run: bool = False,
) -> RecoveryReport:
    """Finish or undo every dead job's commit in the destination and remove what it left.
    A claim counts as dead when its holder is gone or silent for `older_than_s` (or the claim
    timeout, whichever is shorter); other leftovers when nothing in them changed for
    `older_than_s`. A commit that cannot be finished is reported in `failed` and left as is."""
    report = RecoveryReport()
    now = time.time()
    claim = read_claim(store)
    if claim is not None:
        report.found.append(CLAIM_FILE)
        if not claim.is_dead(min(older_than_s, DEFAULT_CLAIM_TIMEOUT_S), now):
            report.skipped_recent.append(CLAIM_FILE)
        elif not dry_run:
            try:
                what = recover_claim(store, claim, rollback=rollback)
                release_claim(store, claim.job_uuid)
                _record(report, claim.job_dir or CLAIM_FILE, what)
                report.removed.append(CLAIM_FILE)
            except (CommitError, StoreError) as e:
                report.failed[claim.job_dir or CLAIM_FILE] = str(e)
    for cls in committer_classes():
        for left in cls.leftovers(store):
            if left.path in report.found:
                continue
            report.found.append(left.path)
            if now - _newest_mtime(store, left.path) < older_than_s:
                report.skipped_recent.append(left.path)
                continue
            if dry_run:
                continue
            held = read_claim(store)
            if held is not None and held.job_uuid == left.job_uuid and left.job_uuid:
                report.skipped_recent.append(left.path)  # its holder is alive and committing
                continue
            try:
                what = cls.recover_leftover(store, left, rollback=rollback)
            except (CommitError, StoreError) as e:
                report.failed[left.path] = str(e)
                continue
            _record(report, left.path, what)
            report.removed.append(left.path)
    if not dry_run:
        for cls in committer_classes():
            cls.tidy(store)
        remove_empty_claim_dir(store)  # a release that died between its two deletes
    report.uploads_aborted = abort_orphaned_uploads(store, older_than_s, now, dry_run)
    return report


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
    if what == "rolled forward":
        report.rolled_forward.append(path)
    elif what == "rolled back":
        report.rolled_back.append(path)


__all__ = [
    "Leftover",
    "RecoveryReport",
    "recover_claim",
    "recover_dead_claim",
    "recover_destination",
]
