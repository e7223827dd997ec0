"""The destination claim: one job commit at a time per destination, fenced.

A job commit first creates `_dataferry/claim.json` with create-if-absent (an exclusive create
locally, an If-None-Match PUT on S3), naming the job, its committer, host and process, a fresh
*generation* and its lease. Whoever creates it owns the destination, so "is the destination
empty?" (mode `error`) and "what do we replace?" (mode `overwrite`) are decided with no other
commit in between. The holder rewrites the record while it commits (the heartbeat).

When is a holder dead? Its process is gone (same host; a zombie counts as gone), it gave up
(`abandoned`), or its record was not renewed for a whole lease **by the store's clock**: the
record's modification time as the store reports it, compared with the modification time of a
probe file the judge writes just then, or the record seen unchanged for a lease on the judge's
own monotonic clock. The holder's own timestamps are never compared with anyone's clock, so a
driver whose clock is minutes off is judged like any other. The lease is the longer of the
taker's timeout and the one the holder declared, and never under `MIN_CLAIM_TIMEOUT_S`, so a
taker with a tiny timeout cannot overtake a holder that renews on its own schedule.

Taking over is fenced. The one taker that creates `_dataferry/fence.<generation>.0` (exclusive
create) may replace the record with its own (a new generation) and recover the dead job; any
other taker backs off. The holder checks before every step that changes what readers see
(intent, replace, each publish batch, `_SUCCESS`) that the record still names its generation
and that no fence for it exists, and stops with `ClaimLost` otherwise, leaving its intent for
the new holder's recovery. What remains is the window between such a check and the step that
follows it; the heartbeat keeps the lease fresh so that only a holder frozen for a whole lease
in that window (and then only its one step) can be late.
"""

from __future__ import annotations

import contextvars
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from ...errors import (
    ClaimLost,
    DestinationClaimed,
    InjectedCrash,
    NotFound,
    StoreError,
    ValidationError,
)
from ...liveness import process_alive
from ...store import FileStatus, Store
from ...store.background import mark_background_thread
from .claim import (
    CLAIM_DIR,
    CLAIM_FILE,
    CLAIM_MAX_BYTES,
    CLOCK_PREFIX,
    DEFAULT_CLAIM_TIMEOUT_S,
    FENCE_PREFIX,
    MIN_CLAIM_TIMEOUT_S,
    Claim,
    ClaimState,
    crashed,
    effective_timeout,
    fence_path,
    new_generation,
    observe_claim,
    read_claim,
)
from .lease import Judge, StoreClock, Verdict

log = logging.getLogger("dataferry.commit")

POLL_S = 0.05
MAX_POLL_S = 0.5
VERIFY_EVERY_S = 1.0  # batch-level fence checks ask the store at most this often

# The fence of the code running now (a takeover recovering a dead job, `cleanup`): stage
# contexts made while it is set check it before each visible step.
current_fence: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "dataferry_claim_fence", default=None
)


def mark_crashed(held: HeldClaim) -> None:
    """The holder of `held` died at an injected crash: stop it and count its claim as dead."""
    held.stop_heartbeat()
    crashed.add(held.claim.generation)


# --- holding a claim -------------------------------------------------------------------------


class HeldClaim:
    """A claim this process holds: renewed on a thread, checked before each visible step,
    until released or abandoned. `fenced` are the generations this holder took over (their
    fence files go when it releases)."""

    def __init__(
        self,
        store: Store,
        claim: Claim,
        heartbeat_s: float | None = None,
        *,
        since: float | None = None,
        fenced: dict[str, str] | None = None,
    ) -> None:
        self.store, self.claim = store, claim
        self.lease_s = effective_timeout(claim.lease_s)
        self.fenced = dict(fenced or {})  # generation -> fence file
        self._confirmed = time.monotonic() if since is None else since
        self._verified = self._confirmed
        self._lost = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        every = self.lease_s / 6 if heartbeat_s is None else heartbeat_s
        if every > 0:
            self._thread = threading.Thread(
                target=self._beat, args=(every,), name="dataferry-claim", daemon=True
            )
            self._thread.start()

    @property
    def lost(self) -> str:
        return self._lost

    def _beat(self, every: float) -> None:
        mark_background_thread()
        while not self._stop.wait(every):
            try:
                with self._lock:
                    self._renew("heartbeat")
            except ClaimLost:
                return
            except StoreError as e:
                log.debug("claim heartbeat on %s failed: %s", self.store.full_url(), e)

    def _renew(self, step: str) -> None:
        self._verify(step)
        sent = time.monotonic()
        record = replace(self.claim, alive=time.time()).to_bytes()
        self.store.write_bytes(CLAIM_FILE, record)
        self._confirmed = sent

    def _verify(self, step: str) -> None:
        if self._lost:
            raise ClaimLost(self._lost)
        why = self._lost_because()
        if why:
            self._lost = (
                f"job {self.claim.job_id} no longer holds the claim on {self.store.full_url()} "
                f"({why}); it stops before {step}"
            )
            log.warning("%s", self._lost)
            raise ClaimLost(self._lost)
        self._verified = time.monotonic()

    def _lost_because(self) -> str:
        state = observe_claim(self.store)
        if state is None:
            return "the claim was removed"
        if state.generation == self.claim.generation:
            if self.store.exists(fence_path(self.claim.generation)):
                return "another job fenced this job's generation to take over"
            return ""
        if state.generation in self.fenced:
            return ""  # the overtaken holder's late heartbeat: ours again at the next renewal
        return f"it is now held by {state.describe()}"

    def check(self, step: str, strict: bool = True) -> None:
        """Raise ClaimLost unless this job still holds the claim, before `step` changes what
        readers see. `strict=False` (each publish batch) asks the store at most once a
        second; the lease is renewed first whenever the heartbeat is late."""
        with self._lock:
            if self._lost:
                raise ClaimLost(self._lost)
            now = time.monotonic()
            if now - self._confirmed > self.lease_s / 2:
                self._renew(step)
            elif strict or now - self._verified > VERIFY_EVERY_S:
                self._verify(step)

    def stop_heartbeat(self) -> None:
        """Stop renewing the claim (it stays as it is on the store)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _ours(self) -> bool:
        """The record on the store is this holder's, or a late renewal of a holder it took
        over. A record of this holder's generation after a taker fenced it is its own late
        renewal (a write that hung in the store) landed over the taker's: not ours."""
        state = observe_claim(self.store)
        if state is None:
            return False
        if state.generation == self.claim.generation:
            return not self.store.exists(fence_path(self.claim.generation))
        return state.generation in self.fenced

    def release(self, tidy: bool = True) -> None:
        """The commit finished (or was rolled back): free the destination. `tidy=False`: the
        caller removes the emptied `_dataferry` itself (a job commit does, once its driver
        record is gone too, instead of listing it twice)."""
        self.stop_heartbeat()
        self._remove_fences()  # (first: a claim left behind is taken over; a fence is not)
        if self._ours():
            self.store.delete(CLAIM_FILE, recursive=True)
        if tidy:
            remove_empty_claim_dir(self.store)

    def abandon(self) -> None:
        """The commit failed after its intent was saved: keep the destination held, but let
        the next job or `dataferry cleanup` recover it at once instead of after the lease."""
        self.stop_heartbeat()
        if not self._lost and self._ours():
            self.store.write_bytes(CLAIM_FILE, replace(self.claim, state="abandoned").to_bytes())
            self._remove_fences()  # the generations it fenced are not current any more

    def _remove_fences(self) -> None:
        for path in self.fenced.values():
            try:
                self.store.delete(path)
            except StoreError:
                pass


def release_claim(store: Store, job_uuid: str) -> bool:
    """Remove the claim if `job_uuid` holds it, and `_dataferry` if nothing else is in it
    (also when the claim was already gone: a release that died half way)."""
    current = read_claim(store)
    ours = current is not None and current.job_uuid == job_uuid
    if ours:
        store.delete(CLAIM_FILE)
    remove_empty_claim_dir(store)
    return ours


def remove_empty_claim_dir(store: Store) -> None:
    """`_dataferry` goes when nothing is left in it (commit records, markers and driver records
    live there; an empty `drivers` directory goes first)."""
    store.delete_if_empty(f"{CLAIM_DIR}/drivers")
    store.delete_if_empty(CLAIM_DIR)


# --- acquiring and taking over ---------------------------------------------------------------

Recover = Callable[[Claim, HeldClaim], object]


def acquire_claim(
    store: Store,
    claim: Claim,
    *,
    wait_s: float,
    timeout_s: float,
    recover: Recover | None,
    heartbeat_s: float | None = None,
) -> HeldClaim:
    """Hold the destination for `claim`'s job. A live holder makes us wait up to `wait_s`
    (0: fail at once), then raise DestinationClaimed naming it; a dead one is fenced, its
    record replaced by ours, and its job recovered with `recover(dead_claim, held)`."""
    lease = effective_timeout(timeout_s)
    claim = replace(claim, lease_s=lease)
    judge = Judge(store, lease)
    deadline = time.monotonic() + wait_s
    delay = POLL_S
    while True:
        sent = time.monotonic()
        try:
            if store.create_if_absent(CLAIM_FILE, claim.to_bytes()):
                return HeldClaim(store, claim, heartbeat_s, since=sent)
        except NotFound:
            continue  # `_dataferry` was removed as we created in it: try again
        except StoreError as e:  # something that is not a claim file is in the way?
            if observe_claim(store) is None:
                raise  # no: the store refuses the create itself (read-only, denied)
            log.debug("creating %s: %s", store.full_url(CLAIM_FILE), e)
        state = observe_claim(store)
        if state is not None:
            resumed = state.claim is not None and state.claim.job_uuid == claim.job_uuid
            verdict = Verdict(True, "it is this job's own earlier claim") if resumed else None
            verdict = verdict or judge.verdict(state)
            if verdict.dead:
                log.warning(
                    "destination %s: taking over the claim of %s: %s",
                    store.full_url(),
                    state.describe(),
                    verdict.why,
                )
                held = take_over(
                    store, state, claim, judge, None if resumed else recover, heartbeat_s
                )
                if held is not None:
                    return held
            elif state.claim is None:  # nobody renews it: waiting cannot end in a handover
                raise DestinationClaimed(
                    f"destination {store.full_url()} holds {state.describe()}, {verdict.why}; "
                    f"job {claim.job_id} gives way (the claim is taken over once it is "
                    f"{judge.lease(state):.0f} s old; `dataferry cleanup --older-than 0` "
                    "removes it now)"
                )
            elif time.monotonic() >= deadline:
                raise DestinationClaimed(
                    f"destination {store.full_url()} is being committed by {state.describe()}, "
                    f"{verdict.why}; job {claim.job_id} gives way"
                )
        elif time.monotonic() >= deadline + max(wait_s, 1.0):
            raise DestinationClaimed(f"destination {store.full_url()}: cannot create {CLAIM_FILE}")
        time.sleep(delay)
        delay = min(delay * 2, MAX_POLL_S)


def take_over(
    store: Store,
    state: ClaimState,
    taker: Claim,
    judge: Judge,
    recover: Recover | None,
    heartbeat_s: float | None = None,
) -> HeldClaim | None:
    """Fence a dead holder's generation, put `taker`'s record in its place and recover the
    dead job; None when another taker is at it or the claim moved on."""
    generation = state.generation
    if taker.generation == generation:  # this job's own earlier claim: a new generation
        taker = replace(taker, generation=new_generation())
    fence = ""
    for n in range(16):
        candidate = fence_path(generation, n)
        if store.create_if_absent(candidate, taker.to_bytes()):
            fence = candidate
            break
        if not _taker_died(store, candidate, judge):
            return None  # another taker is at it
    if not fence:
        return None
    now = observe_claim(store)
    if now is None or now.generation != generation:
        store.delete(fence)  # the claim moved on before we fenced it: nothing to take over
        return None
    if now.status.is_dir:
        store.delete(CLAIM_FILE, recursive=True)
    sent = time.monotonic()
    store.write_bytes(CLAIM_FILE, taker.to_bytes())
    held = HeldClaim(store, taker, heartbeat_s, since=sent, fenced={generation: fence})
    if recover is not None and state.claim is not None:
        token = current_fence.set(held.check)
        try:
            recover(state.claim, held)
        except InjectedCrash:
            mark_crashed(held)
            raise
        except Exception:
            # the dead job stays to recover: its record goes back (abandoned, a new
            # generation), so the next job or cleanup tries again at once
            held.stop_heartbeat()
            if held._ours():
                again = replace(state.claim, generation=new_generation(), state="abandoned")
                store.write_bytes(CLAIM_FILE, again.to_bytes())
            held._remove_fences()
            raise
        finally:
            current_fence.reset(token)
    return held


def _taker_died(store: Store, fence: str, judge: Judge) -> bool:
    """A fence whose taker died before it replaced the claim (its process is gone, or the
    fence is older than a lease by the store's clock)."""
    try:
        st = store.stat(fence)
    except NotFound:
        return True  # released meanwhile: the next number is free to try
    try:
        taker: Claim | None = Claim.parse(store.read_bytes(fence), store.full_url(fence))
    except (StoreError, ValidationError):
        taker = None
    same_host = taker is not None and taker.host == socket.gethostname()
    if same_host and not process_alive(taker.pid, taker.pid_start):
        return True
    return judge.aged(st, judge.timeout_s).dead


def claim_files(store: Store) -> list[FileStatus]:
    """Fence and clock-probe files in `_dataferry` (cleanup removes those no claim needs)."""
    return [
        st
        for st in store.list_or_empty(CLAIM_DIR)
        if st.name.startswith((FENCE_PREFIX, CLOCK_PREFIX)) and not st.is_dir
    ]


__all__ = [
    "CLAIM_FILE",
    "CLAIM_MAX_BYTES",
    "CLOCK_PREFIX",
    "DEFAULT_CLAIM_TIMEOUT_S",
    "MIN_CLAIM_TIMEOUT_S",
    "Claim",
    "ClaimState",
    "HeldClaim",
    "Judge",
    "StoreClock",
    "Verdict",
    "acquire_claim",
    "observe_claim",
    "read_claim",
    "take_over",
]
