"""The sweep a table job makes for dead jobs at its set-up: the whole cleanup (`cleanup.py`)
only when it may have something to do now.

What cleanup recovers at once is what a dead holder or a dead driver left: a claim (its
holder judged dead, or a live one whose leftovers it must leave alone), a driver record judged
dead. While no claim is there and every driver record is judged alive, all it would do is
housekeeping by age (leftovers of no known job older than its hour, claim debris, orphaned
uploads). So a set-up reads the claim and the driver records and judges them as cleanup does;
it runs the whole cleanup when a claim is there, a driver is judged dead, or this process has
made no whole pass over the destination for `REPASS_S`. Concurrent appenders, whose drivers
are all alive, then skip the claim cleanup would take, its listing of every committer's
leftovers and its removals, and a driver that died is still recovered by the next job's
set-up, as before.
"""

from __future__ import annotations

import threading
import time

from ...store import Store
from ..records.claim import MIN_CLAIM_TIMEOUT_S
from ..records.drivers import Drivers
from ..records.hold import Judge, observe_claim
from .cleanup import RecoveryReport, cleanup_destination

REPASS_S = 60.0  # the longest a process goes without a whole pass over a destination
OLDER_THAN_S = 3600.0  # cleanup's own default: a leftover of no known job is recovered after

_passes: dict[str, float] = {}  # destination URL -> when this process last made a whole pass
_lock = threading.Lock()


def sweep(store: Store) -> RecoveryReport | None:
    """Recover what dead jobs left in the destination (`cleanup_destination`), when the
    module's check says there may be some; None when there was nothing to do now."""
    key = store.full_url()
    if not needs_pass(store, key):
        return None
    report = cleanup_destination(store, older_than_s=OLDER_THAN_S)
    with _lock:
        _passes[key] = time.monotonic()
    return report


def needs_pass(store: Store, key: str) -> bool:
    """Whether the whole cleanup may have something to do now (see the module)."""
    with _lock:
        last = _passes.get(key)
    if last is None or time.monotonic() - last > REPASS_S:
        return True
    if observe_claim(store) is not None:
        return True
    judge = Judge(store, MIN_CLAIM_TIMEOUT_S, damaged_lease_s=OLDER_THAN_S)
    return any(v.dead for v in Drivers(store, judge).verdicts.values())


def forget_passes() -> None:
    """Forget every pass this process made (the next set-up of each destination makes one)."""
    with _lock:
        _passes.clear()
