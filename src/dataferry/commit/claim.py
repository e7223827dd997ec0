"""The destination claim: one job commit at a time per destination.

A job commit first creates `_dataferry/claim.json` with create-if-absent (O_EXCL locally, an
If-None-Match PUT on S3), naming the job, its committer, host and process, and when it was last
alive. Whoever creates it owns the destination until it releases it, so "is the destination
empty?" (mode `error`) and "what do we replace?" (mode `overwrite`) are decided with no other
commit in between. A driver refreshes the record while it commits (the heartbeat).

A claim whose holder is dead can be taken over: the holder's process is gone (same host), it
gave up (`abandoned`), or its heartbeat is older than the timeout. The taker first recovers the
dead job's commit (finished from its intent record, or rolled back), then removes the claim.
Takeover is itself serialized by a create-if-absent lock, so two takers never both act.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from ..errors import DestinationClaimed, NotFound, StoreError
from ..store import Store

CLAIM_DIR = "_dataferry"
CLAIM_FILE = f"{CLAIM_DIR}/claim.json"
TAKEOVER_LOCK = f"{CLAIM_DIR}/claim.takeover"
DEFAULT_CLAIM_TIMEOUT_S = 180.0
POLL_S = 0.05


def _process_start(pid: int) -> str:
    """The kernel's start time of a process (tells a reused pid apart); '' where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        return ""


def _alive(pid: int, start: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not start or _process_start(pid) in ("", start)


@dataclass(frozen=True)
class Claim:
    """Who holds a destination, and since when it was last seen alive."""

    job_id: str
    job_uuid: str
    committer: str
    mode: str
    job_dir: str = ""
    attempt: int = 0
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    pid_start: str = field(default_factory=lambda: _process_start(os.getpid()))
    acquired: float = field(default_factory=time.time)
    alive: float = field(default_factory=time.time)
    state: str = "committing"  # or "abandoned": its commit failed, recover it now

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Claim | None:
        try:
            return cls(**json.loads(raw))
        except (ValueError, TypeError):
            return None

    def is_dead(self, timeout_s: float, now: float | None = None) -> bool:
        if self.state == "abandoned":
            return True
        if self.host == socket.gethostname() and self.pid and not _alive(self.pid, self.pid_start):
            return True
        return (now or time.time()) - self.alive > timeout_s

    def describe(self) -> str:
        return (
            f"job {self.job_id} ({self.committer}, mode {self.mode}) on {self.host} pid "
            f"{self.pid}, last alive {time.time() - self.alive:.0f} s ago"
        )


def read_claim(store: Store) -> Claim | None:
    try:
        return Claim.from_bytes(store.read_bytes(CLAIM_FILE))
    except NotFound:
        return None


class HeldClaim:
    """A claim this process holds: refreshed on a thread until released or abandoned."""

    def __init__(self, store: Store, claim: Claim, heartbeat_s: float) -> None:
        self.store, self.claim = store, claim
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if heartbeat_s > 0:
            self._thread = threading.Thread(
                target=self._beat, args=(heartbeat_s,), name="dataferry-claim", daemon=True
            )
            self._thread.start()

    def _beat(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                current = read_claim(self.store)
                if current is None or current.job_uuid != self.claim.job_uuid:
                    return  # taken over: nothing of ours to refresh
                self.store.write_bytes(
                    CLAIM_FILE, replace(self.claim, alive=time.time()).to_bytes()
                )
            except StoreError:
                continue

    def stop_heartbeat(self) -> None:
        """Stop refreshing the claim (it stays as it is on the store)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def release(self) -> None:
        """The commit finished (or was rolled back): free the destination."""
        self.stop_heartbeat()
        release_claim(self.store, self.claim.job_uuid)

    def abandon(self) -> None:
        """The commit failed after its intent was saved: keep the destination held, but let
        the next job or `dataferry cleanup` recover it at once instead of after the timeout."""
        self.stop_heartbeat()
        current = read_claim(self.store)
        if current is not None and current.job_uuid == self.claim.job_uuid:
            self.store.write_bytes(CLAIM_FILE, replace(current, state="abandoned").to_bytes())


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


def acquire_claim(
    store: Store,
    claim: Claim,
    *,
    wait_s: float,
    timeout_s: float,
    recover: Callable[[Claim], None],
    heartbeat_s: float | None = None,
) -> HeldClaim:
    """Hold the destination for `claim`'s job. A live holder makes us wait up to `wait_s`
    (0: fail at once), then raise DestinationClaimed naming it; a dead one is recovered with
    `recover(dead_claim)` and its claim removed."""
    deadline = time.monotonic() + wait_s
    beat = timeout_s / 6 if heartbeat_s is None else heartbeat_s
    while True:
        try:
            if store.create_if_absent(CLAIM_FILE, claim.to_bytes()):
                return HeldClaim(store, claim, beat)
        except NotFound:
            continue  # `_dataferry` was removed as we created in it: try again
        holder = read_claim(store)
        if holder is None:
            if _stale(store, CLAIM_FILE, timeout_s):
                store.delete(CLAIM_FILE)  # an unreadable claim nobody has refreshed
            continue
        if holder.job_uuid == claim.job_uuid:  # ours already (a resumed commit)
            store.write_bytes(CLAIM_FILE, claim.to_bytes())
            return HeldClaim(store, claim, beat)
        if holder.is_dead(timeout_s):
            take_over(store, holder, claim, timeout_s, recover)
            continue
        if time.monotonic() >= deadline:
            raise DestinationClaimed(
                f"destination {store.full_url()} is being committed by {holder.describe()}; "
                f"job {claim.job_id} gives way"
            )
        time.sleep(POLL_S)


def take_over(
    store: Store,
    dead: Claim,
    taker: Claim,
    timeout_s: float,
    recover: Callable[[Claim], None],
) -> bool:
    """Recover a dead holder's commit and remove its claim; False if another taker is at it."""
    if not store.create_if_absent(TAKEOVER_LOCK, taker.to_bytes()):
        if _stale(store, TAKEOVER_LOCK, timeout_s):
            store.delete(TAKEOVER_LOCK)  # a taker that died too
        else:
            time.sleep(POLL_S)
        return False
    try:
        current = read_claim(store)
        if current is None or current.job_uuid != dead.job_uuid:
            return False  # someone else finished the takeover first
        recover(current)
        store.delete(CLAIM_FILE)
        return True
    finally:
        store.delete(TAKEOVER_LOCK)


def _stale(store: Store, path: str, timeout_s: float) -> bool:
    try:
        st = store.stat(path)
    except NotFound:
        return False
    return st.mtime is not None and time.time() - st.mtime > timeout_s
