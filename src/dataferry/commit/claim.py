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
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ..errors import (
    ClaimLost,
    DestinationClaimed,
    InjectedCrash,
    NotFound,
    StoreError,
    ValidationError,
)
from ..liveness import process_alive, this_process
from ..store import FileStatus, Store
from .registry import KNOWN

log = logging.getLogger("dataferry.commit")

CLAIM_DIR = "_dataferry"
CLAIM_FILE = f"{CLAIM_DIR}/claim.json"
FENCE_PREFIX = "fence."
CLOCK_PREFIX = "clock."
DEFAULT_CLAIM_TIMEOUT_S = 180.0
MIN_CLAIM_TIMEOUT_S = 5.0  # a takeover needs six missed heartbeats of at least 0.83 s each
CLAIM_MAX_BYTES = 64 * 1024  # a claim is a few hundred bytes; anything larger is damage
POLL_S = 0.05
MAX_POLL_S = 0.5
VERIFY_EVERY_S = 1.0  # batch-level fence checks ask the store at most this often
CLOCK_REPROBE_S = 30.0
STATES = ("committing", "abandoned")

# The fence of the code running now (a takeover recovering a dead job, `cleanup`): stage
# contexts made while it is set check it before each visible step.
current_fence: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "dataferry_claim_fence", default=None
)


# Generations whose holder "died" at an injected crash (fault injection models a dead process
# while the test's process lives on): judged dead at once, as a gone process is.
_crashed: set[str] = set()


def mark_crashed(held: HeldClaim) -> None:
    """The holder of `held` died at an injected crash: stop it and count its claim as dead."""
    held.stop_heartbeat()
    _crashed.add(held.claim.generation)


def _new_generation() -> str:
    return uuid.uuid4().hex


def effective_timeout(timeout_s: float) -> float:
    """The lease a job asks for: its claim timeout, never under `MIN_CLAIM_TIMEOUT_S`."""
    return max(float(timeout_s), MIN_CLAIM_TIMEOUT_S)


@dataclass(frozen=True)
class Claim:
    """Who holds a destination: the job, its process, its generation and its lease.
    `acquired` and `alive` are the holder's own clock, for people reading the record; no
    decision uses them."""

    job_id: str
    job_uuid: str
    committer: str
    mode: str
    job_dir: str = ""
    attempt: int = 0
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=lambda: this_process()[1])
    pid_start: str = field(default_factory=lambda: this_process()[2])
    generation: str = field(default_factory=_new_generation)
    lease_s: float = DEFAULT_CLAIM_TIMEOUT_S
    acquired: float = field(default_factory=time.time)
    alive: float = field(default_factory=time.time)
    state: str = "committing"  # or "abandoned": its commit failed, recover it now

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def parse(cls, raw: bytes, source: str) -> Claim:
        """A claim from its bytes, every field type-checked; ValidationError naming `source`
        and the field at fault otherwise."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise ValidationError(f"not a claim record (JSON: {e})", source) from None
        if not isinstance(data, dict):
            raise ValidationError("not a claim record (not a JSON object)", source)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                if f.name in ("job_id", "job_uuid", "committer", "mode"):
                    raise ValidationError("missing", source, f.name)
                if f.name == "generation":  # a claim written before generations existed
                    values[f.name] = f"legacy-{data.get('job_uuid')}"
                continue
            value = data[f.name]
            expected = {"int": int, "float": (int, float), "str": str}[str(f.type)]
            if isinstance(value, bool) or not isinstance(value, expected):
                raise ValidationError(
                    f"must be {f.type}, not {type(value).__name__} {value!r:.40}", source, f.name
                )
            values[f.name] = float(value) if f.type == "float" else value
        if values.get("state", "committing") not in STATES:
            raise ValidationError(f"unknown state {values['state']!r:.40}", source, "state")
        return cls(**values)

    def describe(self) -> str:
        return (
            f"job {self.job_id} ({self.committer}, mode {self.mode}) on {self.host} pid {self.pid}"
        )


@dataclass(frozen=True)
class ClaimState:
    """The claim file as found: its status on the store, the record (None when it is damaged),
    and what is wrong with it."""

    status: FileStatus
    claim: Claim | None
    problem: str = ""

    @property
    def generation(self) -> str:
        if self.claim is not None:
            return self.claim.generation
        return f"damaged-{_version(self.status)}"

    def describe(self) -> str:
        if self.claim is None:
            return f"a damaged claim ({self.problem})"
        return self.claim.describe()


def _version(st: FileStatus) -> str:
    """What changes whenever the file is rewritten (etag, else time and size)."""
    return (st.etag or f"{st.mtime}-{st.size}").replace("/", "_").replace('"', "")


def observe_claim(store: Store) -> ClaimState | None:
    """The destination's claim as it is now, None when there is none; a damaged one (wrong
    types, truncated, too large, a directory) comes back with `claim=None` and its problem."""
    try:
        st = store.stat(CLAIM_FILE)
    except NotFound:
        return None
    url = store.full_url(CLAIM_FILE)
    if st.is_dir:
        return ClaimState(st, None, f"{url} is a directory")
    if st.is_link:
        return ClaimState(st, None, f"{url} is a symbolic link")
    if st.size > CLAIM_MAX_BYTES:
        return ClaimState(st, None, f"{url} is {st.size} bytes, over {CLAIM_MAX_BYTES}")
    try:
        raw = store.read_bytes(CLAIM_FILE)
    except NotFound:
        return None
    except StoreError as e:
        return ClaimState(st, None, str(e))
    if len(raw) > CLAIM_MAX_BYTES:
        return ClaimState(st, None, f"{url} is {len(raw)} bytes, over {CLAIM_MAX_BYTES}")
    try:
        claim = Claim.parse(raw, url)
    except ValidationError as e:
        return ClaimState(st, None, str(e))
    if claim.committer and claim.committer not in KNOWN:  # ('' : cleanup's own claim)
        return ClaimState(st, None, f"{url} names committer {claim.committer!r:.60}, unknown")
    return ClaimState(st, claim)


def read_claim(store: Store) -> Claim | None:
    """The destination's claim record, None when there is none or it is damaged."""
    state = observe_claim(store)
    return state.claim if state is not None else None


def fence_path(generation: str, n: int = 0) -> str:
    return f"{CLAIM_DIR}/{FENCE_PREFIX}{generation}.{n}"


# --- judging a holder ------------------------------------------------------------------------


class StoreClock:
    """The store's own time: the modification time of a probe file written just now, carried
    forward by our monotonic clock. Comparing a record's modification time with it compares
    two readings of one clock, whatever our wall clock says."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._base: tuple[float | None, float] | None = None

    def now(self) -> float | None:
        if self._base is None or time.monotonic() - self._base[1] > CLOCK_REPROBE_S:
            self._base = self._probe()
        mtime, at = self._base
        return None if mtime is None else mtime + (time.monotonic() - at)

    def _probe(self) -> tuple[float | None, float]:
        path = f"{CLAIM_DIR}/{CLOCK_PREFIX}{uuid.uuid4().hex}"
        try:
            self.store.write_bytes(path, b"")
            mtime = self.store.stat(path).mtime
        except StoreError:
            return None, time.monotonic()
        finally:
            try:
                self.store.delete(path)
            except StoreError:
                pass
        return mtime, time.monotonic()  # read after the stat: errs towards "alive"

    def age(self, st: FileStatus) -> float | None:
        """Seconds since `st` was last written, by the store's clock (None: unknown)."""
        if st.mtime is None:
            return None
        now = self.now()
        return None if now is None else now - st.mtime


@dataclass(frozen=True)
class Verdict:
    dead: bool
    why: str


class Judge:
    """Decides whether a claim's holder is dead (see the module docstring). `timeout_s` is the
    judge's own lease; `damaged_lease_s` the age after which a damaged record counts as dead."""

    def __init__(
        self, store: Store, timeout_s: float, damaged_lease_s: float | None = None
    ) -> None:
        self.store = store
        self.timeout_s = effective_timeout(timeout_s)
        self.damaged_lease_s = (
            max(self.timeout_s, DEFAULT_CLAIM_TIMEOUT_S)
            if damaged_lease_s is None
            else damaged_lease_s
        )
        self.clock = StoreClock(store)
        self._seen: dict[str, float] = {}

    def lease(self, state: ClaimState) -> float:
        if state.claim is None:
            return self.damaged_lease_s
        return max(self.timeout_s, effective_timeout(state.claim.lease_s))

    def verdict(self, state: ClaimState) -> Verdict:
        c = state.claim
        if c is not None:
            if c.state == "abandoned":
                return Verdict(True, "its job gave up its commit (abandoned)")
            if c.generation in _crashed:
                return Verdict(True, "its holder died at an injected crash")
            if c.host == socket.gethostname() and c.pid and not process_alive(c.pid, c.pid_start):
                return Verdict(True, f"its process {c.pid} on {c.host} is gone")
        return self.aged(state.status, self.lease(state))

    def aged(self, st: FileStatus, lease: float) -> Verdict:
        """Whether a file was last written more than `lease` ago, by the store's clock or by
        our own watch of it staying unchanged."""
        first = self._seen.setdefault(f"{st.path}@{_version(st)}", time.monotonic())
        watched = time.monotonic() - first
        if watched > lease:
            return Verdict(True, f"unchanged for {watched:.0f} s (lease {lease:.0f} s)")
        age = self.clock.age(st)
        if age is not None and age > lease:
            return Verdict(
                True, f"not renewed for {age:.0f} s by the store's clock (lease {lease:.0f} s)"
            )
        when = f"{age:.0f} s ago by the store's clock" if age is not None else "recently"
        return Verdict(False, f"renewed {when} (lease {lease:.0f} s)")


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
        state = observe_claim(self.store)
        return state is not None and (
            state.generation == self.claim.generation or state.generation in self.fenced
        )

    def release(self) -> None:
        """The commit finished (or was rolled back): free the destination."""
        self.stop_heartbeat()
        if self._ours():
            self.store.delete(CLAIM_FILE, recursive=True)
        self._remove_fences()
        remove_empty_claim_dir(self.store)

    def abandon(self) -> None:
        """The commit failed after its intent was saved: keep the destination held, but let
        the next job or `dataferry cleanup` recover it at once instead of after the lease."""
        self.stop_heartbeat()
        if not self._lost and self._ours():
            self.store.write_bytes(CLAIM_FILE, replace(self.claim, state="abandoned").to_bytes())

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
    """`_dataferry` goes when nothing is left in it (commit records and markers live there)."""
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
        except StoreError as e:  # something that is not a claim file is in the way
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
                again = replace(state.claim, generation=_new_generation(), state="abandoned")
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
