"""Who may take a destination from its holder (`records/lease.py`, `records/hold.py`): staleness
is judged by the store's clock, and the lease is the longer of the taker's and the holder's."""

from __future__ import annotations

import os
import time

import pytest

from dataferry.commit.records.hold import CLAIM_FILE, Claim, acquire_claim, read_claim
from dataferry.errors import DestinationClaimed
from dataferry.store import open_store
from dataferry.store.skew import ClockSkewStore

AHEAD_S = 300.0  # the referee's skew


def claim(name: str, **kw) -> Claim:
    """A claim of a driver on another host (so only its lease can say it is dead)."""
    return Claim(f"job_{name}_0001", f"uuid-{name}", "manifest", "append", host="elsewhere", **kw)


def test_a_taker_whose_clock_runs_ahead_never_takes_from_a_holder_that_renews(tmp_path):
    """Were staleness judged by the taker's wall clock (its `time.time()` against the record's
    modification time), a job whose clock runs 300 s ahead of the store would find every claim
    older than the 180 s lease and take the destination from a live job mid-commit: both
    commit at once, and an overwrite deletes what the other publishes."""
    local = open_store(str(tmp_path / "d"))
    holder = acquire_claim(
        local, claim("holder"), wait_s=0, timeout_s=180, recover=None, heartbeat_s=0.2
    )
    try:
        ahead = ClockSkewStore(local, -AHEAD_S)  # the store's clock behind: ours ahead
        for _ in range(3):  # judged afresh while the holder keeps renewing
            with pytest.raises(DestinationClaimed, match="job_holder_0001"):
                acquire_claim(ahead, claim("taker"), wait_s=0.5, timeout_s=180, recover=None)
        assert read_claim(local).job_uuid == "uuid-holder" and not holder.lost
    finally:
        holder.release()


def test_a_short_taker_timeout_never_cuts_a_holders_declared_lease(tmp_path):
    """The lease is the longer of the taker's timeout and the one the holder declared. Were it
    the taker's alone, a job run with `claim_timeout_s=5` would take over a job that declared a
    180 s lease and last renewed 20 s ago (renewing every 30 s, on its schedule): two commits
    into one destination at once."""
    store = open_store(str(tmp_path / "d"))
    store.write_bytes(CLAIM_FILE, claim("holder", lease_s=180.0).to_bytes())
    t = time.time() - 20  # last renewed 20 s ago, by the store's clock
    os.utime(os.path.join(store.root, CLAIM_FILE), (t, t))
    with pytest.raises(DestinationClaimed, match="job_holder_0001"):
        acquire_claim(store, claim("taker"), wait_s=0, timeout_s=5, recover=None, heartbeat_s=0)
    assert read_claim(store).job_uuid == "uuid-holder"


def test_a_record_is_judged_with_the_stores_whole_second_times_in_its_favour(tmp_path):
    """S3 and Azure give modification times in whole seconds, so a record renewed 4.5 s ago
    can read 5.4 s old: judged against a 5 s lease by the reading alone, a live holder would
    be taken from. Only an age past the lease by more than the rounding counts."""
    from dataferry.commit.records.hold import observe_claim
    from dataferry.commit.records.lease import MTIME_RESOLUTION_S, Judge

    store = open_store(str(tmp_path / "d"))
    store.write_bytes(CLAIM_FILE, claim("holder", lease_s=5.0).to_bytes())
    path = os.path.join(store.root, CLAIM_FILE)
    for read_age, dead in (
        (5.0 + MTIME_RESOLUTION_S / 2, False),
        (5.0 + 2 * MTIME_RESOLUTION_S + 1, True),
    ):
        t = time.time() - read_age
        os.utime(path, (t, t))
        verdict = Judge(store, 5.0).verdict(observe_claim(store))
        assert verdict.dead is dead, (read_age, verdict)
