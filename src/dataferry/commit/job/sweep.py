"""The sweep a table job makes for dead jobs at its set-up: the whole cleanup (`cleanup.py`)
only when it may have something to do now.

What cleanup recovers at once is what a dead holder, a dead driver or a job of unknown state
left: a claim (its holder judged dead, or a live one whose leftovers it must leave alone), a
driver record judged dead, a job directory under the committer's markers no live driver names
(recovered once it is old enough). While none of these is there, all it would do is the rest
of its housekeeping by age (other committers' leftovers, claim debris, orphaned uploads). So a
set-up reads the claim, the driver records (judged as cleanup judges them) and the names of
the job directories under its markers; it runs the whole cleanup when any of them asks for
it, or when this process has made no whole pass over the destination for `REPASS_S`.
Concurrent appenders, whose drivers are all alive, then skip the claim cleanup would take, its
listing of every committer's leftovers and its removals; a driver that died, and a job
directory left by a job no live driver runs, are still taken up by the next job's set-up.
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


def sweep(store: Store, markers_root: str) -> RecoveryReport | None:
    """Recover what dead jobs left in the destination (`cleanup_destination`), when the
    module's check says there may be some (`markers_root`: the committer's, whose job
    directories are looked at); None when there was nothing to do now."""
    key = store.full_url()
    if not needs_pass(store, key, markers_root):
        return None
    report = cleanup_destination(store, older_than_s=OLDER_THAN_S)
    with _lock:
        _passes[key] = time.monotonic()
    return report


def needs_pass(store: Store, key: str, markers_root: str) -> bool:
    """Whether the whole cleanup may have something to do now (see the module)."""
    with _lock:
        last = _passes.get(key)
    if last is None or time.monotonic() - last > REPASS_S:
        return True
    if observe_claim(store) is not None:
        return True
    judge = Judge(store, MIN_CLAIM_TIMEOUT_S, damaged_lease_s=OLDER_THAN_S)
    drivers = Drivers(store, judge)
    if any(v.dead for v in drivers.verdicts.values()):
        return True
    jobs = (e.name for e in store.list_or_empty(markers_root) if e.is_dir)
    return any(uuid not in drivers.live for uuid in jobs)


def forget_passes() -> None:
    """Forget every pass this process made (the next set-up of each destination makes one)."""
    with _lock:
        _passes.clear()
