"""A dead job settled by the next job into the destination (it takes over the dead claim,
`recovery.recover_claim`) leaves no driver record behind, as `dataferry cleanup` leaves none;
a dead job whose decided commit cannot be finished keeps its record (it vouches for the
commit until someone finishes or gives it up)."""

from __future__ import annotations

import pytest

from dataferry import make_committer
from dataferry.commit.job.commit import record_job_driver
from dataferry.commit.records.claim import Claim
from dataferry.commit.records.drivers import driver_path
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.errors import InjectedCrash, JobCommitError
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ..helpers import run_job, run_tasks, visible


def dead_job(store, when: str):
    """A v1 job with a driver record whose driver dies at its intent record's write (`before`:
    undecided; `after`: decided); its claim and driver record stay, both dead."""
    c = make_committer("v1", store)
    job = record_job_driver(c, c.new_job())
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: ["p=0/dead"]})
    fault_layer(store).add_rule(
        FaultRule(
            action="crash",
            when=when,
            kinds=frozenset({Op.WRITE}),
            predicate=lambda _i, _op, path: path.endswith(INTENT_FILE),
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert store.exists(driver_path(job.job_uuid))
    return c, job


@pytest.mark.parametrize(("when", "kept"), [("before", False), ("after", True)])
def test_the_next_job_removes_the_dead_jobs_driver_record(tmp_path, when, kept):
    """The next job rolls the dead job back (or finishes its decided commit). Broken, its
    driver record stays under `_dataferry/drivers/` for ever: the destination is never clean
    again, and every later cleanup reports a job that was settled long ago."""
    store = open_store(str(tmp_path / "d"), faults=[])
    _, dead = dead_job(store, when)
    run_job(make_committer("v1", store), {1: ["p=1/next"]})

    assert not store.exists(driver_path(dead.job_uuid))
    assert not store.exists("_dataferry"), visible(store, ["_dataferry"])
    assert ("p=0/dead" in visible(store)) is kept
    assert "p=1/next" in visible(store)


def test_a_dead_jobs_unfinishable_commit_keeps_its_driver_record(tmp_path):
    """The dead job's decided commit cannot be finished (a file it must move has vanished).
    Broken, its driver record goes with the commit still decided: nothing would then vouch
    for that commit, and a later recovery could roll it back half applied."""
    store = open_store(str(tmp_path / "d"), faults=[])
    c, dead = dead_job(store, "after")
    (source,) = [s.path for s in store.walk("_temporary") if "p=0/dead" in s.path]
    store.delete(source)
    with pytest.raises(JobCommitError):
        run_job(make_committer("v1", store), {1: ["p=1/next"]})

    assert store.exists(driver_path(dead.job_uuid))
    assert store.exists(f"{c.job_dir(dead)}/{INTENT_FILE}")


def test_a_driver_record_renewed_elsewhere_is_left(tmp_path):
    """The claim's holder is dead, but the job's driver record was renewed just now from
    another host (its driver lives on there). Broken, the next job removes a live driver's
    record, and cleanup then takes that running job for one without a driver."""
    store = open_store(str(tmp_path / "d"), faults=[])
    _, dead = dead_job(store, "before")
    record = Claim(str(dead.job_id), dead.job_uuid, "v1", "append", host="elsewhere")
    store.write_bytes(driver_path(dead.job_uuid), record.to_bytes())  # renewed just now
    run_job(make_committer("v1", store), {1: ["p=1/next"]})

    assert store.exists(driver_path(dead.job_uuid))
