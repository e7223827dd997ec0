"""The parties of a race (`races.py`): the schedules' constants, and the jobs that race the
claim holder on this side (the holder itself is a driver in a child process, `child.py`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from ..errors import DataferryError
from ..store import FaultRule, Store, open_store
from ..store.skew import ClockSkewStore
from .harness import PreparedJob, prepare_job, status_of

PAUSED_SCHEDULES = (
    "skewed_clock",
    "taker_clock_ahead",
    "short_timeout",
    "longer_lease",
    "lease_expired",
    "cleanup_race",
)
SCHEDULES = (*PAUSED_SCHEDULES, "two_takers", "overtaken_batches")
POINTS = ("planning", "decided", "applying", "after_success")
SKEWS_S = (-300.0, 300.0)
TAKER_AHEAD_S = 300.0  # `taker_clock_ahead`: the taker's clock runs this far ahead of the store's
SHORT_TIMEOUT_S = 0.2
HOLDER_LEASE_S = 30.0  # `longer_lease`: the holder's declared lease, far past the taker's own
RACE_AFTER_S = 0.5  # the racer starts this long after the holder stopped (> SHORT_TIMEOUT_S)
PAUSE_S = 1.0  # then the holder stays stopped until the racer ends, or this long at most
SLOW_OP_S = 0.02  # each store operation of the slow taker


# --- the jobs on this side ----------------------------------------------------------------------


@dataclass
class Side:
    """One job in a race and how it ended; `start`/`end` bound its job commit (monotonic)."""

    name: str
    uuid: str
    status: str = ""
    error: str = ""
    job: PreparedJob | None = None
    store: Store | None = None  # the store it was prepared on (its faults, if any)
    start: float = 0.0
    end: float = float("inf")

    @property
    def committed(self) -> bool:
        return self.status == "committed"

    def commit(self) -> None:
        self.start = time.monotonic()
        try:
            if self.job is not None:
                self.job.commit()
                self.status, self.error = self.job.status, self.job.error
        finally:
            self.end = time.monotonic()

    def abort(self) -> None:
        """A prepared job that never committed is aborted, as its driver would."""
        if self.job is not None and not self.status:
            try:
                self.job.committer.abort_job(self.job.job)
            except Exception:
                pass


def prepare_side(
    committer: str,
    url: str,
    mode: str,
    options: dict[str, Any],
    side: Side,
    rules: list,
    clock_ahead_s: float = 0.0,
    record_driver: bool = False,
) -> Side:
    """A job on its own store (with `rules`; its clock `clock_ahead_s` ahead of the store's:
    every modification time it reads that much earlier), prepared to commit (`record_driver`:
    with this process recorded as its driver, as an engine's)."""
    store = open_store(url, faults=rules, latency_scale=0.0)
    if clock_ahead_s:
        store = ClockSkewStore(store, -clock_ahead_s)
    side.store = store
    try:
        side.job = prepare_job(
            committer, store, mode, options, side.uuid, record_driver=record_driver
        )
    except DataferryError as e:  # the mode applied up front refused it
        side.status, side.error = status_of(e), f"{type(e).__name__}: {e}"
    return side


def lease_expiry_s() -> float:
    """How long a holder with `claim_timeout_s=0.2` must be silent before a taker with the same
    timeout may judge it dead: the claim's minimum lease where there is one, and 1.5 s more."""
    from ..commit.records import hold as claim

    return max(SHORT_TIMEOUT_S, float(getattr(claim, "MIN_CLAIM_TIMEOUT_S", 0.0))) + 1.5


def slow_store_rules() -> list[FaultRule]:
    return [FaultRule(action="callback", callback=lambda *_: time.sleep(SLOW_OP_S), times=-1)]


SETTLE_S = 0.3  # how long A waits for B at the chosen operation before it goes on
JOIN_S = 60.0  # how long B may take to finish once A is done


class SecondJob:
    """Job B's commit on a thread of its own, started once: from the fault rule at A's chosen
    operation (A waits `SETTLE_S` for it there), or after A's commit when that ended first."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self._thread: threading.Thread | None = None

    def start(self, *_: Any) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self.side.commit, name="dataferry-job-b", daemon=True
        )
        self._thread.start()
        self._thread.join(SETTLE_S)

    def wait(self, timeout_s: float = JOIN_S) -> bool:
        """Whether B's commit ended within `timeout_s` (started here if it had not been)."""
        self.start()
        assert self._thread is not None
        self._thread.join(timeout_s)
        return not self._thread.is_alive()
