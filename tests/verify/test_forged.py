"""The referee's forged-marker schedule, refereed: it must report the loss when the ownership
check is broken (a rollback or a job commit deleting whatever a marker names), find nothing on
the committers as they are, and reach `dataferry verify crash --forged-markers`.

Broken, the schedule would pass a committer whose cleanup or next job deletes a user's
committed data on a forged marker's word: the loss the schedule exists to show."""

from __future__ import annotations

import json

import pytest

from dataferry.commit.direct import committer as direct_committer
from dataferry.commit.direct import deletion
from dataferry.verify import invariants as inv
from dataferry.verify.forged import KIND, RECORDS_KIND, Forgery, run_forged
from dataferry.verify.harness import ScenarioStores, deterministic_options


@pytest.fixture
def stores():
    s = ScenarioStores(None)
    yield s
    s.close()


def _forgery(stores, committer: str = "direct") -> Forgery:
    return Forgery(committer, stores, deterministic_options(committer), seed=0)


def _trust_every_marker(monkeypatch) -> None:
    """The ownership check broken on purpose: every file a marker names is the job's."""
    everything = lambda _committer, _directory, candidates: list(candidates)  # noqa: E731
    monkeypatch.setattr(deletion, "owned_files", everything)
    monkeypatch.setattr(direct_committer, "owned_files", everything)


def test_a_made_up_jobs_markers_and_a_live_jobs_forged_ones_delete_nothing(stores):
    forgery = _forgery(stores)
    made_up = forgery.after_commit("made_up", "cleanup")
    live = forgery.live("before_the_plan")
    assert made_up is not None
    assert made_up.problems == [] and made_up.outcome == "committed"
    assert live.problems == [] and live.outcome == "committed"


def test_the_schedule_reports_the_loss_when_markers_are_trusted(stores, monkeypatch):
    _trust_every_marker(monkeypatch)
    forgery = _forgery(stores)
    made_up = forgery.after_commit("made_up", "cleanup")
    live = forgery.live("before_the_plan")
    assert made_up is not None
    for scenario in (made_up, live):
        assert inv.EARLIER_KEPT in scenario.violated, scenario.problems
        assert any(
            "data files the committed version references were deleted" in p
            for p in scenario.problems
        )


def test_a_committer_without_markers_gets_only_the_forged_intent_record(stores):
    found, skipped = run_forged("manifest", stores, deterministic_options("manifest"))
    assert set(skipped) == {KIND}
    assert {s.kind for s in found} == {RECORDS_KIND}


def test_a_forged_intent_record_deletes_nothing(stores):
    """A made-up job's intent record of mode overwrite, listing the committed files to replace:
    cleanup refuses it (no claim nor driver record names its job) and the next job commits.
    Broken, `dataferry cleanup` would delete every committed file the forger listed."""
    scenario = _forgery(stores).intent()
    assert scenario.problems == []


def test_verify_crash_command_runs_the_forged_markers(monkeypatch):
    """`--forged-markers` reaches `verify_crash`, and its JSON counts the forgeries by kind
    (the crash points cut to none: they have tests of their own)."""
    from typer.testing import CliRunner

    from dataferry.cli import app
    from dataferry.verify import crash

    real, asked = crash.verify_crash, {}

    def smaller(committer, store=None, **kwargs):
        asked.update(kwargs)
        return real(committer, store, **{**kwargs, "limit": 0})

    monkeypatch.setattr(crash, "verify_crash", smaller)
    res = CliRunner().invoke(
        app, ["verify", "crash", "--committer", "direct", "--forged-markers", "--json"]
    )
    assert asked["forged_markers"] is True
    data = json.loads(res.stdout)
    assert (
        data["forgeries"]
        == data["kinds"][KIND]["scenarios"] + data["kinds"][RECORDS_KIND]["scenarios"]
    )
    assert data["kinds"][KIND]["scenarios"] == 13
    assert data["kinds"][KIND]["total_violations"] == 0, data["examples"][:2]


def test_a_committed_jobs_directory_claimed_for_another_job_deletes_nothing(stores):
    pytest.importorskip("hudi")
    from dataferry.verify import tables

    with tables.read_as("hudi", deterministic_options("hudi")):
        scenario = _forgery(stores, "hudi").job_records()
    assert scenario is not None and scenario.problems == []
