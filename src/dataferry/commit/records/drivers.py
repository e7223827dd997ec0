"""Driver records: which process runs each job, from job setup on, so cleanup knows.

An engine records its job's driver as soon as the job is set up, long before the job commit
takes the destination's claim: `_dataferry/drivers/<job uuid>.json`, a claim-shaped record (job,
committer, host, pid and its start time, lease) renewed by a heartbeat and removed when the job
commits or is aborted. `dataferry cleanup` judges each record as a taker judges a claim
(`lease.py`): a job whose driver is alive is left alone whatever `--older-than` says, and one
whose driver is known dead is recovered at once, whichever phase it died in.

Before cleanup recovers a job whose driver it judged dead, it fences the driver:
`<job uuid>.fenced` beside the record, created if absent. A job commit that holds no claim
checks for it (with its record) before every step readers see (`driver_fence`), and the
heartbeat stops renewing once it is there. Cleanup reads the job's intent record only after
the fence is made, so a driver judged dead by its lease while merely frozen either wrote its
intent record first (cleanup then finishes its commit: nothing of it is deleted) or finds the
fence at its next check and stops: it never commits files its rollback removed. What remains
is the claim's own window (`hold.py`): a heartbeat frozen between its look at the record and
its rewrite for the whole recovery could bring the record back after cleanup removed it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

from ...errors import ClaimLost, StoreError
from ...store import Store
from ...store.background import mark_background_thread
from .claim import CLAIM_DIR, Claim, ClaimState, crashed, observe_record
from .lease import Judge

log = logging.getLogger("dataferry.commit")

DRIVERS_DIR = f"{CLAIM_DIR}/drivers"
FENCED = ".fenced"
_lock = threading.Condition()  # the beats below, and the heart's wake-up
BEAT_JOIN_S = 10.0  # a renewal in flight is one small write


@dataclass
class _Beat:
    """A driver record's heartbeat in this process: renewed by the process's one heart
    thread (`_heart`) every sixth of its lease, until `end`."""

    store: Store
    job_uuid: str
    data: bytes
    generation: str
    interval_s: float
    due: float
    lock: threading.Lock = field(default_factory=threading.Lock)  # held by a renewal
    stopped: bool = False

    def renew(self) -> None:
        """One renewal (see `record_driver`), unless ended; none once the record is gone or
        fenced."""
        with self.lock:
            if self.stopped:
                return
            path = driver_path(self.job_uuid)
            try:
                if not self.store.exists(path) or self.store.exists(fence_path(self.job_uuid)):
                    self.stopped = True  # the job ended (perhaps in another process), or fenced
                    return
                self.store.write_bytes(path, self.data)
            except StoreError as e:
                log.debug("driver heartbeat %s: %s", self.store.full_url(path), e)
            self.due = time.monotonic() + self.interval_s

    def end(self) -> None:
        """Stop renewing, and wait for a renewal in flight: one the process's exit cut off
        would leave its hidden temporary file, and one that lands after the record's removal
        would bring the record back."""
        held = self.lock.acquire(timeout=BEAT_JOIN_S)
        self.stopped = True
        if held:
            self.lock.release()


_beats: dict[tuple[str, str], _Beat] = {}
_heart_thread: list[threading.Thread] = []


def _heart() -> None:
    """The process's one heartbeat thread: renews each record when it is due (one thread for
    every job of the process, started once: a job's set-up and end wait for no thread)."""
    mark_background_thread()
    while True:
        with _lock:
            now = time.monotonic()
            due = [b for b in _beats.values() if not b.stopped and b.due <= now]
            if not due:
                soonest = min((b.due for b in _beats.values() if not b.stopped), default=None)
                _lock.wait(None if soonest is None else soonest - now)
                continue
        for beat in due:
            beat.renew()


def _start_heart() -> None:
    """Start the heart thread unless it runs (under `_lock`; again in a forked child)."""
    if not _heart_thread or not _heart_thread[0].is_alive():
        thread = threading.Thread(target=_heart, name="dataferry-drivers", daemon=True)
        _heart_thread[:] = [thread]
        thread.start()


def driver_path(job_uuid: str) -> str:
    return f"{DRIVERS_DIR}/{job_uuid}.json"


def fence_path(job_uuid: str) -> str:
    """Where cleanup fences a job's driver it judged dead before recovering the job."""
    return f"{DRIVERS_DIR}/{job_uuid}{FENCED}"


def fence_driver(store: Store, job_uuid: str) -> None:
    """Fence the driver of a job about to be recovered (see the module docstring): from now
    on its claimless commit stops before any step readers see."""
    store.create_if_absent(fence_path(job_uuid), b"")  # its directory remade if removed


def record_driver(store: Store, record: Claim) -> None:
    """Write this process's driver record for a job (claim-shaped: the job, this process, the
    lease) and renew it every sixth of the lease until `end_driver` (or until it is removed)."""
    job_uuid, lease_s = record.job_uuid, record.lease_s
    data = record.to_bytes()
    store.write_bytes(driver_path(job_uuid), data)  # its directory remade if removed
    interval = lease_s / 6
    beat = _Beat(store, job_uuid, data, record.generation, interval, time.monotonic() + interval)
    with _lock:
        _beats[(store.url, job_uuid)] = beat
        _start_heart()
        _lock.notify()


def end_driver(store: Store, job_uuid: str) -> None:
    """The job committed or was aborted: stop its heartbeat here and remove its record."""
    with _lock:
        beat = _beats.pop((store.url, job_uuid), None)
    if beat is not None:
        beat.end()
    try:
        store.delete(driver_path(job_uuid))
    except StoreError as e:
        log.debug("removing driver record of %s: %s", job_uuid, e)
    # emptied (or left empty by a claim released without tidying): removed all the same
    store.delete_if_empty(DRIVERS_DIR)
    store.delete_if_empty(CLAIM_DIR)


def abandon_driver(store: Store, job_uuid: str) -> None:
    """The driver gives up a decided commit it could not finish: its heartbeat stops and its
    record stays, marked abandoned (dead to cleanup, which recovers the job at once), so that
    it still vouches for the job's intent record (`job/vouch.py`). No record: nothing to do."""
    with _lock:
        beat = _beats.pop((store.url, job_uuid), None)
    if beat is not None:
        beat.end()
    state = observe_record(store, driver_path(job_uuid))
    if state is None or state.claim is None:
        return
    try:
        store.write_bytes(driver_path(job_uuid), replace(state.claim, state="abandoned").to_bytes())
    except StoreError as e:
        log.debug("abandoning driver record of %s: %s", job_uuid, e)


def driver_fence(store: Store, job_uuid: str) -> Callable[..., None]:
    """The fence of a job commit that holds no claim (an append through a table's optimistic
    concurrency): before each step that changes what readers see, the job's own driver record
    must still be there, this process's (its generation) and not given up. Cleanup removes
    the record of a driver it judged dead once it has recovered the job, and a job it rolled
    back must not then commit files that are gone: ClaimLost, as for a claim taken over."""
    with _lock:
        beat = _beats.get((store.url, job_uuid))
    generation = beat.generation if beat is not None else ""

    def check(step: str, strict: bool = True) -> None:
        state = observe_record(store, driver_path(job_uuid))
        record = state.claim if state is not None else None
        why = ""
        if record is None:
            why = "its driver record was removed or damaged (judged dead and recovered)"
        elif generation and record.generation != generation:
            why = "its driver record is another process's"
        elif record.state == "abandoned":
            why = "its driver record was given up"
        elif store.exists(fence_path(job_uuid)):
            why = "cleanup judged its driver dead and fenced it to recover the job"
        if why:
            message = f"job {job_uuid}: {why}; it stops before {step}"
            log.warning("%s", message)
            raise ClaimLost(message)

    return check


def driver_crashed(store: Store, job_uuid: str) -> None:
    """The driver died at an injected crash: its record stays, and counts as dead."""
    with _lock:
        beat = _beats.pop((store.url, job_uuid), None)
    if beat is not None:
        beat.end()
        crashed.add(beat.generation)


def driver_records(store: Store) -> dict[str, ClaimState]:
    """Every driver record in the destination, by job uuid (damaged ones too)."""
    found = {}
    for st in store.list_or_empty(DRIVERS_DIR):
        if st.is_dir or not st.name.endswith(".json"):
            continue
        state = observe_record(store, st.path)
        if state is not None:
            found[st.name[: -len(".json")]] = state
    return found


class Drivers:
    """What cleanup knows of the destination's jobs from their driver records."""

    def __init__(self, store: Store, judge: Judge) -> None:
        self.store = store
        self.records = driver_records(store)
        self.verdicts = {uuid: judge.verdict(state) for uuid, state in self.records.items()}
        self.live = {uuid: v.why for uuid, v in self.verdicts.items() if not v.dead}

    def why_left(self, job_uuid: str) -> str:
        """Why a leftover of `job_uuid` ('' when its job is not known) must be left alone."""
        if job_uuid and job_uuid in self.live:
            return f"its job's driver is alive ({self.live[job_uuid]})"
        if not job_uuid and self.live:
            some = next(iter(self.live))
            return f"it names no job, and the driver of job {some} is alive"
        return ""

    def known_dead(self, job_uuid: str) -> bool:
        return bool(job_uuid) and job_uuid in self.verdicts and self.verdicts[job_uuid].dead

    def remove_dead(self, keep: Collection[str] = ()) -> None:
        """Remove the records of dead drivers, except those of the jobs in `keep` (whose commit
        cleanup left in place: the record vouches for their intent record, `job/vouch.py`)."""
        for uuid, verdict in self.verdicts.items():
            if verdict.dead and uuid not in keep:
                try:  # the record first, then its fence (a renewal stops at either)
                    self.store.delete(driver_path(uuid))
                    self.store.delete(fence_path(uuid))
                except StoreError:
                    pass
        for st in self.store.list_or_empty(DRIVERS_DIR):  # fences whose record is gone
            uuid = st.name[: -len(FENCED)]
            if st.name.endswith(FENCED) and uuid not in self.records and uuid not in keep:
                try:
                    self.store.delete(st.path)
                except StoreError:
                    pass
        self.store.delete_if_empty(DRIVERS_DIR)

    def __bool__(self) -> bool:
        return bool(self.records)


def remove_dead_driver(store: Store, job_uuid: str, judge: Judge) -> bool:
    """Remove the driver record of a job whose commit was just settled (finished or rolled
    back) by another process, if its driver is dead, as cleanup removes the records of dead
    drivers once it has recovered their jobs; a live driver's record stays. True if removed."""
    path = driver_path(job_uuid)
    state = observe_record(store, path)
    if state is None or not judge.verdict(state).dead:
        return False
    try:
        store.delete(path)
        store.delete(fence_path(job_uuid))
    except StoreError as e:
        log.debug("removing driver record of %s: %s", job_uuid, e)
        return False
    store.delete_if_empty(DRIVERS_DIR)
    return True
