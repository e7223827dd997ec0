"""The referee's racing appenders without the claim (`verify/concurrent_appends.py`): two
recorded drivers appending into one table, the first dying or losing its answer at its
transaction, with cleanup recovering it while the second commits."""

from __future__ import annotations

import pytest

from dataferry.commit.job import recovery
from dataferry.verify.concurrent_appends import run_concurrent_appends
from dataferry.verify.harness import EXISTING, ScenarioStores, deterministic_options
from dataferry.verify.tables import read_as

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def run(tmp_path, name: str, faults: tuple[str, ...]) -> list:
    options = deterministic_options(name)
    if name == "hudi":  # inserts into a table keeping Hudi's metadata table take the claim
        options["metadata_table"] = False
    with read_as(name, options):  # the process reads destinations as tables in the run
        stores = ScenarioStores(str(tmp_path))
        return run_concurrent_appends(
            name, stores, options, points=0, destinations=(EXISTING,), faults=faults
        )


@pytest.mark.parametrize(
    "name, fault, outcome",
    [
        ("delta", "crash_before_commit", "A crashed, B committed"),
        ("iceberg", "lost_answer", "A committed, B committed"),
        ("hudi", "crash_before_commit", "A crashed, B committed"),
        ("hudi", "lost_answer", "A committed, B committed"),
    ],
)
def test_racing_appenders_land_once_without_the_claim(tmp_path, monkeypatch, name, fault, outcome):
    """Both appenders commit with the destination's claim made impossible to take (were either
    to wait on it, it would fail and the scenario would say so), A's death before its
    transaction is finished by cleanup while B commits (Delta, Hudi), and A's lost answer is
    not committed twice (Iceberg, Hudi): 0 problems."""

    def no_claim(*_a, **_k):
        raise AssertionError("a claimless append took the destination's claim")

    monkeypatch.setattr(recovery, "acquire_claim", no_claim)
    scenarios = run(tmp_path, name, (fault,))
    assert [s.outcome for s in scenarios] == [outcome]
    assert [p for s in scenarios for p in s.problems] == []


def test_a_double_commit_is_seen(tmp_path, monkeypatch):
    """Were the job's landed commit not looked for (in the table before any retry, and among
    the winners of a taken version or the versions a group commit walks), A's lost answer
    would be committed twice: the referee says so."""
    import dataferry.commit.table.delta.committer as delta
    from dataferry.commit.table.delta import group

    once, put = delta.commit_exactly_once, delta.put_commit
    monkeypatch.setattr(group._Walk, "landed", lambda *_: None)

    def never_landed(ctx, what, _landed, *args, **kwargs):
        return once(ctx, what, lambda: None, *args, **kwargs)

    monkeypatch.setattr(delta, "commit_exactly_once", never_landed)
    monkeypatch.setattr(delta, "put_commit", lambda s, v, act, _app, r: put(s, v, act, "", r))
    scenarios = run(tmp_path, "delta", ("lost_answer",))
    assert any("2x" in p for s in scenarios for p in s.problems)


@pytest.mark.parametrize("name", ["delta", "iceberg"])
def test_appenders_meeting_in_one_group_land_once(tmp_path, name):
    """Two drivers' appends meet in one group commit (a Delta log entry, an Iceberg
    snapshot): A dies just before the group's transaction (B's then carries A) or just after
    it, or lands alone and dies before removing its request (which B then finds): each job
    lands exactly once, cleanup deletes nothing that landed, nothing is left over. Were the
    group not formed, the outcome would say "in two entries"; were a job committed twice or
    its files removed, a problem."""
    faults = ("group_crash_before", "group_crash_after", "group_landed")
    scenarios = run(tmp_path, name, faults)
    assert [s.outcome for s in scenarios] == [
        "A crashed, B committed, in one entry",
        "A crashed, B committed, in one entry",
        "A crashed, B committed, in two entries",
    ]
    assert [p for s in scenarios for p in s.problems] == []


def test_a_landed_request_carried_again_is_seen(tmp_path, monkeypatch):
    """Were the group commit's walk not to look for txns in the versions since a request's
    base, A's request (landed, left by A's death) would be carried again by B's entry and A
    committed twice: the referee says so."""
    from dataferry.commit.table.delta import group

    monkeypatch.setattr(group._Walk, "landed", lambda self, app_id, since: None)
    scenarios = run(tmp_path, "delta", ("group_landed",))
    assert any("2x" in p for s in scenarios for p in s.problems)


def test_an_iceberg_landed_request_carried_again_is_seen(tmp_path, monkeypatch):
    """Were an Iceberg leader not to look for a request's job among the jobs the table's
    snapshots name, A's request (landed, left by A's death) would be carried again by B's
    snapshot and A committed twice: the referee says so."""
    from dataferry.commit.table.iceberg import group

    monkeypatch.setattr(group, "landed_jobs", lambda tbl: set())
    scenarios = run(tmp_path, "iceberg", ("group_landed",))
    assert any("2x" in p for s in scenarios for p in s.problems)
