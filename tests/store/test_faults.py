from __future__ import annotations

import pytest

from dataferry.errors import (
    AccessDenied,
    AmbiguousOutcome,
    InjectedCrash,
    InjectedFault,
    NotFound,
)
from dataferry.store import FaultRule, Op, crash_at, fault_layer, open_store
from dataferry.store.faults import call_at


def test_crash_is_not_an_exception():
    assert not issubclass(InjectedCrash, Exception)
    store = open_store("memory://faults/crash", faults=[crash_at(0)])
    swallowed = False
    with pytest.raises(InjectedCrash):
        try:
            store.write_bytes("a", b"1")
        except Exception:
            swallowed = True
    assert not swallowed


def test_crash_before_means_no_effect(tmp_path):
    store = open_store(str(tmp_path), faults=[crash_at(1, "before")])
    store.write_bytes("a", b"1")
    with pytest.raises(InjectedCrash) as e:
        store.rename("a", "b")
    assert e.value.index == 1
    assert store.exists("a") and not store.exists("b")


def test_crash_after_means_effect_took_place(tmp_path):
    store = open_store(str(tmp_path), faults=[crash_at(1, "after")])
    store.write_bytes("a", b"1")
    with pytest.raises(InjectedCrash):
        store.rename("a", "b")
    assert not store.exists("a") and store.exists("b")


def test_rules_by_kind_and_path_and_times(tmp_path):
    rule = FaultRule(action="fail", kinds=frozenset({Op.WRITE}), path_glob="data/*", times=2)
    store = open_store(str(tmp_path), faults=[rule])
    store.write_bytes("meta/x", b"ok")
    for _ in range(2):
        with pytest.raises(InjectedFault):
            store.write_bytes("data/x", b"1")
    store.write_bytes("data/x", b"third time works")
    assert store.read_bytes("data/x") == b"third time works"
    assert rule.fired == 2


def test_ambiguous_after_took_effect(tmp_path):
    store = open_store(
        str(tmp_path),
        faults=[FaultRule(action="ambiguous", when="after", kinds=frozenset({Op.RENAME}))],
    )
    store.write_bytes("a", b"1")
    with pytest.raises(AmbiguousOutcome):
        store.rename("a", "b")
    assert store.exists("b")


def test_deny_and_predicate(tmp_path):
    store = open_store(
        str(tmp_path),
        faults=[FaultRule(action="deny", times=-1, predicate=lambda i, op, p: op.mutates)],
    )
    with pytest.raises(AccessDenied):
        store.mkdirs("x")
    with pytest.raises(NotFound):
        store.stat("x")  # reads are not selected


def test_trace_indexes_every_operation_and_disarm_stops_tracing(tmp_path):
    store = open_store(str(tmp_path), faults=[])
    fault = fault_layer(store)
    store.write_bytes("a", b"1")
    store.stat("a")
    store.list("")
    assert [(t.index, t.op) for t in fault.trace] == [
        (0, Op.WRITE),
        (1, Op.STAT),
        (2, Op.LIST),
    ]
    fault.armed = False
    store.stat("a")
    assert fault.op_count == 3


def test_faults_sit_below_the_sim_model(tmp_path):
    """A copy-based directory rename can be broken half way: not atomic, as on GCS."""
    for i in range(3):
        open_store(str(tmp_path)).write_bytes(f"src/f{i}", b"x")
    rule = FaultRule(action="crash", when="after", kinds=frozenset({Op.DELETE}))
    store = open_store(f"sim:gcs:{tmp_path}", faults=[rule], latency_scale=0)
    with pytest.raises(InjectedCrash):
        store.rename("src", "dst")
    plain = open_store(str(tmp_path))
    assert [s.path for s in plain.walk("dst")] == ["dst/f0"]
    assert [s.path for s in plain.walk("src")] == ["src/f1", "src/f2"]


def test_idempotent_operations_are_asked_again_after_an_unknown_outcome(tmp_path):
    """A timeout on a delete, mkdirs, stat, list, read or overwriting write is repeated (the
    repeat's answer is the answer); a rename's or exclusive create's is left to its caller."""
    from dataferry.errors import AmbiguousOutcome

    store = open_store(str(tmp_path / "s"), faults=[])
    store.write_bytes("a", b"1")
    store.write_bytes("b", b"1")
    for kind in (Op.DELETE, Op.MKDIRS, Op.WRITE, Op.STAT, Op.LIST, Op.READ):
        fault_layer(store).add_rule(FaultRule(action="ambiguous", kinds=frozenset({kind})))
    store.delete("a")
    store.mkdirs("d")
    store.write_bytes("c", b"2")
    assert not store.exists("a") and store.stat("d").is_dir and store.read_bytes("c") == b"2"
    assert [e.path for e in store.list("")] == ["b", "c", "d"]
    assert store.stats.counter("store_ambiguous_retried") >= 6
    fault_layer(store).add_rule(FaultRule(action="ambiguous", kinds=frozenset({Op.RENAME})))
    with pytest.raises(AmbiguousOutcome):
        store.rename("b", "e")


def test_heartbeat_renewals_take_no_index_so_a_jobs_steps_keep_theirs(tmp_path):
    """The referee stops a holder, or crashes a job, at an operation index taken from an
    earlier run of the same job. Renewals come at times, not at steps: were they indexed, a
    slower run (a loaded machine, a slow store) renews more often before a step, every later
    index moves, and the holder stopped "just after its claim" stops just before it (seen on
    Azurite: the taker was then right to commit, and the referee reported a live holder
    overtaken). Rules without an index still reach the renewals."""
    import time

    from dataferry.commit.records.claim import CLAIM_DIR, Claim
    from dataferry.commit.records.drivers import end_driver, record_driver
    from dataferry.commit.records.hold import acquire_claim

    store = open_store(str(tmp_path / "dest"), faults=[])
    fault = fault_layer(store)
    renewals = FaultRule(
        action="callback", path_glob=f"{CLAIM_DIR}/*", times=-1, callback=lambda *_: None
    )
    record = Claim("job_1", "u-1", "manifest", "append", lease_s=0.3)  # renewed every 0.05 s
    record_driver(store, record)
    held = acquire_claim(store, record, wait_s=0, timeout_s=5, recover=None, heartbeat_s=0.05)
    store.write_bytes("a", b"1")
    first = fault.op_count
    fault.add_rule(renewals)
    fault.add_rule(call_at(first + 1, lambda *_: stopped.append(True)))
    stopped: list[bool] = []
    time.sleep(0.5)  # both heartbeats renew several times
    store.write_bytes("b", b"2")
    store.write_bytes("c", b"3")
    held.release()
    end_driver(store, record.job_uuid)
    steps = [t.path for t in fault.trace[first - 1 : first + 2]]
    assert steps == ["a", "b", "c"], steps
    assert stopped == [True]  # at "c", the step after "b", as in a run without renewals
    assert renewals.fired >= 4  # the renewals still went through the fault layer
