"""A table job's set-up sweep (`job/sweep.py`): the whole cleanup only when the claim or a dead
driver asks for it, or when this process made no whole pass over the destination lately; a
driver that died is recovered by the next set-up however recent the last pass."""

from __future__ import annotations

import pytest

from dataferry.commit.job import sweep
from dataferry.commit.records.claim import CLAIM_FILE, Claim
from dataferry.commit.records.drivers import driver_path
from dataferry.store import open_store

from .test_dead_driver_record import dead_job

MARKERS = "_dataferry/delta-markers"


@pytest.fixture(autouse=True)
def _fresh():
    sweep.forget_passes()
    yield
    sweep.forget_passes()


def counted(monkeypatch) -> list[object]:
    """The whole cleanups `sweep` runs (each still made)."""
    calls: list[object] = []
    whole = sweep.cleanup_destination

    def cleanup(store, **kw):
        calls.append(store)
        return whole(store, **kw)

    monkeypatch.setattr(sweep, "cleanup_destination", cleanup)
    return calls


def live_driver(store) -> Claim:
    """A running job's driver record (this process, renewed just now)."""
    record = Claim("job_1_0001", "a" * 32, "delta", "append")
    store.write_bytes(driver_path(record.job_uuid), record.to_bytes())
    return record


def test_live_drivers_skip_the_whole_pass(tmp_path, monkeypatch):
    """Every driver alive and no claim, right after a whole pass: nothing is recovered now,
    so the set-up skips the claim, listings and removals of a whole pass. Broken (a whole
    pass at every set-up), concurrent appenders take the destination's claim for nothing."""
    store = open_store(str(tmp_path / "d"))
    calls = counted(monkeypatch)
    live_driver(store)
    assert sweep.sweep(store, MARKERS) is not None  # the process's first set-up here: a whole pass
    assert sweep.sweep(store, MARKERS) is None
    assert sweep.sweep(store, MARKERS) is None
    assert len(calls) == 1


def test_a_whole_pass_comes_back_after_its_period(tmp_path, monkeypatch):
    """The housekeeping by age (leftovers of no known job) still runs: once the period since
    the last whole pass is over. Broken (skipped for good), such leftovers stay for ever."""
    store = open_store(str(tmp_path / "d"))
    calls = counted(monkeypatch)
    live_driver(store)
    sweep.sweep(store, MARKERS)
    monkeypatch.setattr(sweep, "REPASS_S", 0.0)
    assert sweep.sweep(store, MARKERS) is not None
    assert len(calls) == 2


def test_a_claim_asks_for_a_whole_pass(tmp_path, monkeypatch):
    """A claim is there (its holder alive or dead): the whole cleanup judges it. Broken, a
    dead holder's commit waits for the next period to be recovered."""
    store = open_store(str(tmp_path / "d"))
    calls = counted(monkeypatch)
    sweep.sweep(store, MARKERS)
    store.write_bytes(CLAIM_FILE, Claim("job_1_0002", "b" * 32, "v1", "overwrite").to_bytes())
    assert sweep.sweep(store, MARKERS) is not None
    assert len(calls) == 2


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_dead_driver_is_recovered_right_after_a_whole_pass(tmp_path, when):
    """A job's driver dies (before or after its intent record) just after this process's
    whole pass: the next set-up recovers it at once, as before. Broken (the pass's period
    alone decides), its files and records stay until the period is over."""
    store = open_store(str(tmp_path / "d"), faults=[])
    sweep.sweep(store, MARKERS)  # a whole pass, just now
    _, dead = dead_job(store, when)
    report = sweep.sweep(store, MARKERS)
    assert report is not None
    assert report.rolled_forward if when == "after" else report.rolled_back
    assert not store.exists(driver_path(dead.job_uuid))


def test_a_dead_driver_without_a_claim_is_recovered_right_after_a_whole_pass(tmp_path):
    """A claimless job (an append) whose driver is judged dead, no claim in the destination:
    the driver records alone ask for the whole cleanup, which settles the job and removes its
    record. Broken (only the claim asks), a dead appender's leftovers wait for the period."""
    store = open_store(str(tmp_path / "d"))
    sweep.sweep(store, MARKERS)  # a whole pass, just now
    live = live_driver(store)
    gone = Claim("job_1_0003", "c" * 32, "delta", "append", state="abandoned")
    store.write_bytes(driver_path(gone.job_uuid), gone.to_bytes())
    assert sweep.sweep(store, MARKERS) is not None
    assert not store.exists(driver_path(gone.job_uuid))
    assert store.exists(driver_path(live.job_uuid))


def test_a_job_directory_no_live_driver_names_asks_for_a_whole_pass(tmp_path, monkeypatch):
    """A job directory under the markers whose job no live driver runs (a job of unknown
    state: forged, or left by an engine without driver records): the whole cleanup judges it
    (by its age), as before; a live driver's own directory asks for nothing. Broken (job
    directories not looked at), such a leftover waits for the period."""
    store = open_store(str(tmp_path / "d"))
    calls = counted(monkeypatch)
    live = live_driver(store)
    sweep.sweep(store, MARKERS)
    store.write_bytes(f"{MARKERS}/{live.job_uuid}/part-0.parquet.marker", b"")
    assert sweep.sweep(store, MARKERS) is None
    store.write_bytes(f"{MARKERS}/{'d' * 32}/part-0.parquet.marker", b"")
    assert sweep.sweep(store, MARKERS) is not None
    assert len(calls) == 2
