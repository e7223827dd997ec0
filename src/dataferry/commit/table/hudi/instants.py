"""A job's instant on a Hudi timeline that several jobs write at once.

Appends commit without the destination's claim (`HudiFormat.commits_without_claim`), so two
jobs may take their instants at the same moment. What keeps the timeline exact:

    unique      a new job's instant is reserved by creating its record,
                `.hoodie/.temp/<instant>/dataferry-job.json`, if absent: the job that loses
                the create reads the timeline again and takes a later one (as Hudi 0.x leaves
                uniqueness to its instant-time generator under a lock provider, the create is
                our lock)
    ordered     an instant is later than every instant on the timeline and every reserved
                one when it is taken (`next_instant`); one taken earlier may complete later,
                as under Hudi's optimistic concurrency, where instant times are taken at the
                start of a write and completed in any order
    exclusive   the instant completes by the create-if-absent of `<instant>.commit`, whose
                `extraMetadata` names the job: a lost answer is settled by reading it back

An append writes new file groups only (file ids unique to the job, attempt and file), so two
appends never touch one file group: Hudi's own check at commit
(`SimpleConcurrentFileWritesConflictResolutionStrategy`: the file ids both writers changed)
finds nothing to refuse between them, and there is nothing to rebase.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ....errors import CommitError, NotFound, StoreError
from ....store import Store
from .timeline import HOODIE, JOB_RECORD, TEMP, instant_of_name, next_instant

RESERVE_TRIES = 50  # instants lost to other jobs in a row before a job gives up


def timeline_instants(store: Store) -> list[str]:
    """Every instant the timeline holds or a job has reserved."""
    found = [instant_of_name(e.name) for e in store.list_or_empty(HOODIE)]
    found += [e.name for e in store.list_or_empty(TEMP) if instant_of_name(e.name + ".")]
    return [i for i in found if i]


def record_path(instant: str) -> str:
    return f"{TEMP}/{instant}/{JOB_RECORD}"


def job_record(job_uuid: str, job_id: str, instant: str) -> bytes:
    record = {"job_uuid": job_uuid, "job_id": job_id, "instant": instant}
    return json.dumps(record).encode("utf-8")


def reserve_instant(store: Store, job_uuid: str, job_id: str) -> str:
    """A new instant for job `job_uuid`, later than every one on the timeline, its record
    created (if absent) so that no other job takes it."""
    for _ in range(RESERVE_TRIES):
        instant = next_instant(timeline_instants(store))
        try:
            if not store.create_if_absent(
                record_path(instant), job_record(job_uuid, job_id, instant)
            ):
                continue
        except NotFound:  # `.hoodie/.temp` emptied and removed under the create: again
            continue
        if not used_since(store, instant):
            return instant
        release(store, instant)
    raise CommitError(
        f"job {job_id}: lost {RESERVE_TRIES} Hudi instants in a row to other jobs of "
        f"{store.full_url()}; nothing was written"
    )


def used_since(store: Store, instant: str) -> bool:
    """Whether `instant` was another job's after all: the timeline names it, or a rollback
    was made after it. The listing that chose it may be older than that job's whole life
    (reserved, completed or rolled back, its record removed), so the create of a record that
    job had removed succeeds; what that job left on the timeline says so."""
    for e in store.list_or_empty(HOODIE):
        other = instant_of_name(e.name)
        if other == instant or (other and other > instant and ".rollback" in e.name):
            return True
    return False


def release(store: Store, instant: str) -> None:
    """Remove this job's record of an instant it may not keep (and its empty directory)."""
    try:
        store.delete(record_path(instant))
        store.delete_if_empty(f"{TEMP}/{instant}")
    except (NotFound, StoreError):
        pass


def record_of(store: Store, instant: str) -> Mapping[str, str] | None:
    """The instant's job record (None: none, or not readable)."""
    try:
        data = json.loads(store.read_bytes(record_path(instant)) or b"{}")
    except (NotFound, ValueError):
        return None
    return data if isinstance(data, dict) else None


def hold_instant(store: Store, instant: str, job_uuid: str, job_id: str) -> None:
    """The job's record at its instant (made if absent: an instant given in the options);
    CommitError if another job's record is there (its instant is that job's)."""
    if store.create_if_absent(record_path(instant), job_record(job_uuid, job_id, instant)):
        return
    record = record_of(store, instant)
    if record is not None and record.get("job_uuid") not in (job_uuid, None):
        raise CommitError(
            f"job {job_id}: Hudi instant {instant} of {store.full_url()} is job "
            f"{record.get('job_uuid')}'s; nothing was written"
        )
