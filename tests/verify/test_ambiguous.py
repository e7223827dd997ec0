"""Ambiguous answers: the fault layer's, the referee's enumeration of them, and the scenario
where another writer's file stands at a rename's destination when the answer comes."""

from __future__ import annotations

import pytest

from dataferry.commit.registry import KNOWN
from dataferry.errors import AmbiguousOutcome
from dataferry.store import Op, open_store
from dataferry.store import fault_layer as find_fault_layer
from dataferry.store.faults import TracedOp, ambiguous_at
from dataferry.verify import invariants as inv
from dataferry.verify import verify_crash
from dataferry.verify.ambiguous import AMBIGUOUS_OPS, ambiguous_points, run_decoy_scenario
from dataferry.verify.harness import ScenarioStores, deterministic_options
from dataferry.verify.scenario import baseline

from .broken_committers import SPECS


@pytest.fixture
def stores():
    s = ScenarioStores(None)
    yield s
    s.close()


# --- the fault layer -----------------------------------------------------------------------------


def test_ambiguous_before_did_nothing_and_after_took_effect(tmp_path):
    store = open_store(str(tmp_path), faults=[ambiguous_at(1, "before"), ambiguous_at(4, "after")])
    store.write_bytes("a", b"1")
    with pytest.raises(AmbiguousOutcome):
        store.rename("a", "b")  # op 1: lost on its way
    assert store.exists("a") and not store.exists("b")  # ops 2, 3
    with pytest.raises(AmbiguousOutcome):
        store.copy("a", "c")  # op 4: done, but the answer timed out
    assert store.read_bytes("c") == b"1"


def test_a_rule_may_let_another_writer_act_before_its_answer(tmp_path):
    seen = []

    def meanwhile(i, op, path):
        fault = find_fault_layer(store)
        seen.append((i, op, path, fault.trace[i].dest))
        fault.inner.write_bytes(fault.trace[i].dest, b"someone else's")

    store = open_store(str(tmp_path), faults=[ambiguous_at(1, "before", meanwhile)])
    store.write_bytes("a", b"mine")
    with pytest.raises(AmbiguousOutcome):
        store.rename("a", "b")
    assert seen == [(1, Op.RENAME, "a", "b")]
    assert store.read_bytes("b") == b"someone else's" and store.read_bytes("a") == b"mine"


def test_the_trace_records_where_renames_and_copies_go(tmp_path):
    store = open_store(str(tmp_path), faults=[])
    store.write_bytes("a", b"1")
    store.copy("a", "b")
    store.rename("b", "c")
    trace = find_fault_layer(store).trace
    assert [(t.op, t.path, t.dest) for t in trace] == [
        (Op.WRITE, "a", ""),
        (Op.COPY, "a", "b"),
        (Op.RENAME, "b", "c"),
    ]


# --- the enumeration -----------------------------------------------------------------------------


def _trace() -> list[TracedOp]:
    ops = [
        (Op.WRITE, "_temporary/x/part=p0/t0-f0-a0.dat", ""),
        (Op.STAT, "_temporary/x", ""),
        (Op.RENAME, "_temporary/x/part=p0/t0-f0-a0.dat", "part=p0/t0-f0-a0.dat"),
        (Op.RENAME, "_temporary/x/m.tmp", "_temporary/x/m.json"),
        (Op.COPY, "_temporary/x/part=p1/t0-f1-a0.dat", "part=p1/t0-f1-a0.dat"),
        (Op.MULTIPART_COMPLETE, "part=p0/t1-f0-a0.dat", ""),
        (Op.CREATE_IF_ABSENT, "_dataferry/claim.json", ""),
        (Op.DELETE, "_temporary", ""),
        (Op.TABLE_COMMIT, "_delta_log", ""),  # a table committer's transaction
        (Op.LIST, "", ""),
    ]
    return [TracedOp(i, op, path, dest) for i, (op, path, dest) in enumerate(ops)]


def test_every_ambiguous_operation_is_answered_before_and_after():
    points = ambiguous_points(_trace())
    plain = [(p.index, p.when) for p in points if not p.decoy]
    assert plain == [(i, w) for i in (0, 2, 3, 4, 5, 6, 7, 8) for w in ("before", "after")]
    assert {Op(p.op) for p in points} == AMBIGUOUS_OPS
    # another writer's file: only where a data file is put in place, and only before
    decoys = [(p.index, p.when, p.decoy) for p in points if p.decoy]
    assert decoys == [
        (2, "before", "part=p0/t0-f0-a0.dat"),
        (4, "before", "part=p1/t0-f1-a0.dat"),
        (5, "before", "part=p0/t1-f0-a0.dat"),
    ]


def test_sampling_keeps_every_kind_of_answer():
    full = ambiguous_points(_trace())
    sampled = ambiguous_points(_trace(), every=5)
    kinds = {(p.op, p.when, bool(p.decoy)) for p in full}
    assert len(sampled) < len(full)
    assert {(p.op, p.when, bool(p.decoy)) for p in sampled} == kinds
    assert ambiguous_points(_trace(), select=lambda t: t.op == Op.DELETE) == [
        p for p in full if p.op == Op.DELETE.value
    ]


# --- the referee runs them --------------------------------------------------------------------


def test_verify_crash_answers_every_ambiguous_operation_of_the_job():
    report = verify_crash("manifest", None, select=lambda t: t.op == Op.DELETE, limit=4)
    data = report.to_json()
    assert data["ambiguous_points"] == report.ambiguous_points == 4
    assert data["kinds"]["ambiguous"]["scenarios"] == 4
    assert {s.when for s in report.of_kind("ambiguous")} == {"before", "after"}
    assert all(s.op == "delete" and s.schedule for s in report.of_kind("ambiguous"))


def test_the_answers_cover_every_kind_the_job_has(stores):
    _, trace = baseline("manifest", stores, deterministic_options("manifest"))
    points = ambiguous_points(trace)
    kinds = {t.op for t in trace} & AMBIGUOUS_OPS
    assert {Op(p.op) for p in points} == kinds >= {Op.RENAME, Op.WRITE, Op.DELETE}
    assert len([p for p in points if not p.decoy]) == 2 * sum(t.op in kinds for t in trace)
    assert any(p.decoy for p in points)


# --- another writer's file at the destination ------------------------------------------------


def _first_decoy(committer: str, stores: ScenarioStores) -> int:
    _, trace = baseline(committer, stores, deterministic_options(committer))
    return next(p.index for p in ambiguous_points(trace) if p.decoy)


@pytest.fixture
def broken_rows(monkeypatch):
    for name, spec in SPECS.items():
        monkeypatch.setitem(KNOWN, name, spec)


def test_assuming_a_lost_rename_worked_commits_another_writers_file(stores, broken_rows):
    """The issue's case: an ambiguous rename taken for done without an etag check leaves the
    other writer's file in place of the job's own, under `_SUCCESS`."""
    committer = "broken-ambiguous"
    index = _first_decoy(committer, stores)
    scenario, _ = run_decoy_scenario(
        committer, stores.url("decoy"), index, deterministic_options(committer)
    )
    assert scenario.outcome == "committed"
    assert {inv.EXCLUSIVE, inv.NO_FALSE_SUCCESS} <= scenario.violated, scenario.problems


@pytest.mark.parametrize(("committer", "store"), [("manifest", None), ("v1", "sim:hdfs")])
def test_a_committer_never_takes_another_writers_file_for_its_own(committer, store):
    """After a lost rename with another writer's file at its destination, a commit must put
    its own file there or fail; never end under `_SUCCESS` with the other file. (manifest:
    fails while its resumed rename stage counts a file of the recorded size as its own.)"""
    s = ScenarioStores(store)
    try:
        index = _first_decoy(committer, s)
        scenario, _ = run_decoy_scenario(
            committer, s.url("decoy"), index, deterministic_options(committer)
        )
    finally:
        s.close()
    assert not scenario.problems, (scenario.outcome, scenario.problems)
