"""Judging a claim's holder: dead or alive, by the store's clock (see `claim.py`).

A holder is dead when its process is gone (same host; a zombie counts as gone), it gave up
(`abandoned`), it died at an injected crash, or its record was not renewed for a whole lease by
the store's clock: the record's modification time against that of a probe file written just
then, or the record seen unchanged for a lease on the judge's own monotonic clock. The holder's
own timestamps are never compared with the judge's clock.
"""

from __future__ import annotations

import socket
import time
import uuid
from dataclasses import dataclass

from ...errors import StoreError
from ...liveness import process_alive
from ...store import FileStatus, Store
from .claim import (
    CLAIM_DIR,
    CLOCK_PREFIX,
    DEFAULT_CLAIM_TIMEOUT_S,
    ClaimState,
    crashed,
    effective_timeout,
    version_of,
)

CLOCK_REPROBE_S = 30.0
# Object stores give modification times in whole seconds (S3's and Azure's Last-Modified): the
# record's and the probe's can each read up to this much early, so an age is taken this much
# younger than it reads; a live holder is never judged dead on a rounding.
MTIME_RESOLUTION_S = 1.0


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
        """Seconds since `st` was last written, by the store's clock, at least (None:
        unknown): taken `MTIME_RESOLUTION_S` younger than it reads."""
        if st.mtime is None:
            return None
        now = self.now()
        return None if now is None else now - st.mtime - MTIME_RESOLUTION_S


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
            if c.generation in crashed:
                return Verdict(True, "its holder died at an injected crash")
            if c.host == socket.gethostname() and c.pid and not process_alive(c.pid, c.pid_start):
                return Verdict(True, f"its process {c.pid} on {c.host} is gone")
        return self.aged(state.status, self.lease(state))

    def aged(self, st: FileStatus, lease: float) -> Verdict:
        """Whether a file was last written more than `lease` ago, by the store's clock or by
        our own watch of it staying unchanged."""
        first = self._seen.setdefault(f"{st.path}@{version_of(st)}", time.monotonic())
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
