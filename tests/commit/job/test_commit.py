"""The job commit every committer shares: the claim, the write mode decided at commit, the
intent record, and each stage of finishing a commit (`commit/jobcommit.py`, `claim.py`,
`intent.py`, `recovery.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.job.stages import REPLACED_PHASE, replace_existing, save_success
from dataferry.commit.protocol import StageContext
from dataferry.commit.records.hold import (
    CLAIM_FILE,
    Claim,
    HeldClaim,
    Judge,
    acquire_claim,
    observe_claim,
    read_claim,
)
from dataferry.commit.records.intent import (
    INTENT_FILE,
    DamagedRecord,
    Intent,
    load_intent,
    save_intent,
)
from dataferry.commit.records.success import read_success
from dataferry.errors import (
    ClaimLost,
    DestinationClaimed,
    DestinationError,
    InjectedCrash,
    JobCommitError,
)
from dataferry.stats import IOStatistics
from dataferry.store import FaultRule, IOPool, Op, fault_layer, open_store

from ..helpers import run_tasks, visible


def job_of(store, mode="append", name="manifest", **options):
    if name != "v1":  # the JSON _SUCCESS names the job that committed, which tests check
        options = {"success_data": True, **options}
    c = make_committer(name, store, mode=mode, **options)
    job = c.new_job()
    c.setup_job(job)
    return c, job


def dead_pid() -> int:
    """The pid of a process that has exited (a killed driver's)."""
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(p.stdout)


def ctx_of(store):
    return StageContext(store=store, stats=IOStatistics(), pool=IOPool(2))


# --- the claim ---------------------------------------------------------------------------------


def test_a_live_claim_makes_error_and_overwrite_jobs_give_way_naming_the_holder(tmp_path):
    store = open_store(str(tmp_path / "d"))
    holder = Claim("job_holder_0001", "uuid-holder", "manifest", "overwrite")
    held = acquire_claim(store, holder, wait_s=0, timeout_s=60, recover=None, heartbeat_s=0)
    for mode in ("error", "overwrite"):
        c, job = job_of(store, mode)
        msgs = run_tasks(c, job, {0: ["p=1/a"]})
        with pytest.raises(DestinationClaimed, match="job_holder_0001"):
            c.commit_job(job, msgs)
        c.abort_job(job)
        assert visible(store) == [] and read_claim(store).job_uuid == "uuid-holder"
    held.release()
    assert not store.exists(CLAIM_FILE) and not store.exists("_dataferry")


def test_append_waits_for_a_live_claim_then_commits(tmp_path):
    store = open_store(str(tmp_path / "d"))
    holder = Claim("job_holder_0001", "uuid-holder", "manifest", "append")
    held = acquire_claim(store, holder, wait_s=0, timeout_s=60, recover=None, heartbeat_s=0.05)
    c, job = job_of(store, "append", claim_timeout_s=0.5)
    msgs = run_tasks(c, job, {0: ["p=1/a"]})
    with pytest.raises(DestinationClaimed):  # still held after the wait
        c.commit_job(job, msgs)
    c2, job2 = job_of(store, "append", claim_timeout_s=30)
    msgs2 = run_tasks(c2, job2, {0: ["p=1/b"]})
    import threading

    threading.Timer(0.3, held.release).start()
    start = time.monotonic()
    c2.commit_job(job2, msgs2)
    assert time.monotonic() - start >= 0.25 and visible(store) == ["p=1/b"]


def test_a_dead_holders_decided_commit_is_finished_before_the_takeover(tmp_path):
    store = open_store(str(tmp_path / "d"), faults=[])
    dead, dead_job = job_of(store, "append", io_threads=1)
    msgs = run_tasks(dead, dead_job, {0: ["p=1/a", "p=2/b"], 1: ["p=1/c"]})
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="after", kinds=frozenset({Op.RENAME}), times=1)
    )
    with pytest.raises(InjectedCrash):
        dead.commit_job(dead_job, msgs)
    fault_layer(store).armed = False
    assert len(visible(store)) == 1  # died after its first rename
    claim = read_claim(store)
    store.write_bytes(CLAIM_FILE, Claim(**{**claim.__dict__, "pid": dead_pid()}).to_bytes())
    c, job = job_of(store, "error")
    msgs2 = run_tasks(c, job, {0: ["p=9/z"]})
    with pytest.raises(DestinationError, match="not empty"):  # finished first, then refused
        c.commit_job(job, msgs2)
    assert visible(store) == ["p=1/a", "p=1/c", "p=2/b"]
    assert read_success(store) is not None  # finished by the taker, in its own form
    c.abort_job(job)
    assert not store.exists("_temporary") and read_claim(store) is None


def test_heartbeat_refreshes_the_claim_and_a_silent_one_is_dead(tmp_path):
    store = open_store(str(tmp_path / "d"))
    claim = Claim("job_a_0001", "uuid-a", "manifest", "append", alive=time.time() - 100)
    store.write_bytes(CLAIM_FILE, claim.to_bytes())
    held = HeldClaim(store, claim, heartbeat_s=0.05)
    deadline = time.monotonic() + 5
    while read_claim(store).alive < time.time() - 50 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert time.time() - read_claim(store).alive < 5
    held.release()
    judge = Judge(store, 60)
    other_host = Claim("j", "u", "manifest", "append", host="elsewhere", lease_s=60)
    store.write_bytes(CLAIM_FILE, other_host.to_bytes())
    assert not judge.verdict(observe_claim(store)).dead  # renewed just now, by the store
    old = time.time() - 100
    os.utime(os.path.join(store.root, CLAIM_FILE), (old, old))
    assert judge.verdict(observe_claim(store)).dead  # silent for longer than its lease
    for dead in (
        Claim("j", "u", "manifest", "append", pid=dead_pid()),
        Claim("j", "u", "manifest", "append", state="abandoned"),
    ):
        store.write_bytes(CLAIM_FILE, dead.to_bytes())
        assert judge.verdict(observe_claim(store)).dead


# --- the write mode, decided at commit -------------------------------------------------------


def test_error_mode_is_decided_at_commit_and_the_loser_leaves_nothing(tmp_path):
    store = open_store(str(tmp_path / "d"))
    a, job_a = job_of(store, "error")
    b, job_b = job_of(store, "error")
    ma = run_tasks(a, job_a, {0: ["p=1/a"]})
    mb = run_tasks(b, job_b, {0: ["p=1/b"]})
    a.commit_job(job_a, ma)
    with pytest.raises(DestinationError, match="not empty"):
        b.commit_job(job_b, mb)
    b.abort_job(job_b)
    assert visible(store) == ["p=1/a"] and read_success(store).data.job_id == job_a.job_uuid
    assert not store.exists("_temporary") and not store.exists("_dataferry")


def test_overwrite_replaces_only_at_commit_and_spares_jobs_in_flight(tmp_path):
    store = open_store(str(tmp_path / "d"))
    store.write_bytes("p=1/old", b"old")
    store.write_bytes("top-old", b"old")
    store.write_bytes("_SUCCESS", b"")
    other, other_job = job_of(store, "append")
    run_tasks(other, other_job, {0: ["p=3/other"]})
    c, job = job_of(store, "overwrite")
    msgs = run_tasks(c, job, {0: ["p=1/new"], 1: ["p=2/new"]})
    assert visible(store) == ["p=1/old", "top-old"]  # nothing replaced before the commit
    c.commit_job(job, msgs)
    assert visible(store) == ["p=1/new", "p=2/new"]
    assert read_success(store).data.job_id == job.job_uuid
    assert store.exists(f"_temporary/{other_job.job_uuid}")  # another job's work is left alone


def test_a_job_that_fails_before_its_intent_leaves_earlier_data_exactly(tmp_path):
    store = open_store(str(tmp_path / "d"), faults=[])
    store.write_bytes("p=1/old", b"old")
    store.write_bytes("_SUCCESS", b"old success")
    c, job = job_of(store, "overwrite")
    msgs = run_tasks(c, job, {0: ["p=1/new"]})
    fault_layer(store).add_rule(
        FaultRule(action="fail", path_glob=f"*{INTENT_FILE}", kinds=frozenset({Op.WRITE}))
    )
    with pytest.raises(JobCommitError, match="save_intent"):
        c.commit_job(job, msgs)
    c.abort_job(job)
    assert visible(store) == ["p=1/old"] and store.read_bytes("_SUCCESS") == b"old success"
    assert not store.exists("_temporary") and not store.exists("_dataferry")


# --- the intent record and the stages that finish a commit ---------------------------------


def test_an_intent_record_cut_short_is_damage_never_no_decision(tmp_path):
    store = open_store(str(tmp_path / "d"))
    intent = Intent("job_x_0001", "uuid", "manifest", "append", payload={"k": [1, 2]})
    save_intent(store, "job", intent)
    assert load_intent(store, "job") == intent
    raw = store.read_bytes(f"job/{INTENT_FILE}")
    store.write_bytes(f"job/{INTENT_FILE}", raw[: len(raw) // 2])
    with pytest.raises(DamagedRecord, match=INTENT_FILE):
        load_intent(store, "job")
    store.delete(f"job/{INTENT_FILE}")
    assert load_intent(store, "job") is None  # absent: never decided
    store.write_bytes(f"job/{INTENT_FILE}.{REPLACED_PHASE}", b"")
    assert load_intent(store, "job") is None  # only a late marker: nothing to finish
    store.write_bytes("job/tasks/part-0", b"x")
    with pytest.raises(DamagedRecord, match="replaced"):  # gone, yet a phase was done
        load_intent(store, "job")


def test_replace_existing_runs_once(tmp_path):
    store = open_store(str(tmp_path / "d"))
    store.write_bytes("p=1/old", b"old")
    intent = Intent("job_x_0001", "uuid", "manifest", "overwrite", replace=["p=1"])
    save_intent(store, "job", intent)
    ctx = ctx_of(store)
    assert replace_existing(ctx, "job", intent) == 1 and not store.exists("p=1")
    assert store.exists(f"job/{INTENT_FILE}.{REPLACED_PHASE}")
    store.write_bytes("p=1/new", b"new")  # new files moved in; then the commit died
    assert replace_existing(ctx, "job", intent) == 0 and store.exists("p=1/new")
    assert ctx.stage_seconds["replace_existing"] >= 0


def test_replace_existing_stops_at_the_first_delete_after_the_claim_is_lost(tmp_path):
    """A holder stopped past its lease between its check and its deletes: its taker may have
    committed since, so not one more entry of the destination may go."""
    store = open_store(str(tmp_path / "d"))
    for p in ("p=1", "p=2", "p=3"):
        store.write_bytes(f"{p}/old", b"old")
    intent = Intent("job_x_0001", "uuid", "manifest", "overwrite", replace=["p=1", "p=2", "p=3"])
    save_intent(store, "job", intent)
    checks: list[str] = []

    def fence(step: str, strict: bool = True) -> None:
        checks.append(step)
        if len(checks) > 1:  # the claim was taken over after the stage's first check
            raise ClaimLost("job job_x_0001 no longer holds the claim")

    ctx = StageContext(store=store, stats=IOStatistics(), pool=IOPool(2), fence=fence)
    with pytest.raises(ClaimLost):
        replace_existing(ctx, "job", intent)
    assert all(store.exists(f"{p}/old") for p in ("p=1", "p=2", "p=3"))
    assert not store.exists(f"job/{INTENT_FILE}.{REPLACED_PHASE}")


def test_save_success_replaces_in_one_step(tmp_path):
    store = open_store(str(tmp_path / "d"))
    store.write_bytes("_SUCCESS", b"old")
    assert save_success(ctx_of(store), "job", b"new") == "_SUCCESS"
    assert store.read_bytes("_SUCCESS") == b"new" and store.list_or_empty("job") == []
    s3ish = open_store(f"sim:s3:{tmp_path / 's'}", latency_scale=0)
    save_success(ctx_of(s3ish), "job", b"put")  # no rename there: one PUT
    assert s3ish.read_bytes("_SUCCESS") == b"put" and not s3ish.exists("job")


def test_rolling_forward_costs_the_other_half_and_one_listing(tmp_path):
    """A commit that died after half its renames is finished with one rename per file still
    to move, one walk of the job directory and one listing per destination directory."""
    store = open_store(str(tmp_path / "d"), faults=[])
    c, job = job_of(store, "append", io_threads=1)
    msgs = run_tasks(c, job, {t: [f"p={t % 4}/f{t}-{i}" for i in range(10)] for t in range(8)})
    moved = {"n": 0}

    def halfway(i, op, p):
        if op == Op.RENAME and "/tasks/" in p:
            moved["n"] += 1
            return moved["n"] == 40
        return False

    fault_layer(store).add_rule(FaultRule(action="crash", when="after", predicate=halfway))
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert len(visible(store)) == 40
    before = dict(store.stats.counters)
    report = cleanup_destination(store, older_than_s=0)
    ops = {k: v - before.get(k, 0) for k, v in store.stats.counters.items()}
    assert report.rolled_forward and len(visible(store)) == 80
    assert ops.get("op_rename", 0) == 40 + 1  # the other half, and _SUCCESS
    assert ops.get("op_stat", 0) < 20 and ops.get("op_list", 0) < 40


def test_a_commit_whose_source_vanished_is_left_in_place_and_reported(tmp_path):
    store = open_store(str(tmp_path / "d"), faults=[])
    c, job = job_of(store, "append", io_threads=1)
    msgs = run_tasks(c, job, {0: ["p=1/a", "p=1/b", "p=1/c"]})
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="after", kinds=frozenset({Op.RENAME}), times=1)
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    # someone deleted a file the commit still had to move
    store.delete(c.attempt_path(job.task(0), "p=1/c"))
    report = cleanup_destination(store, older_than_s=0)
    assert report.failed and "vanished" in next(iter(report.failed.values()))
    assert load_intent(store, c.job_dir(job)) is not None and read_claim(store) is not None
    assert not store.exists("_SUCCESS") and visible(store) == ["p=1/a", "p=1/b"]


def test_a_v1_job_that_loses_the_claim_leaves_the_winners_decided_commit_alone(tmp_path):
    """v1 jobs share `_temporary/0`: the loser's abort must neither finish nor delete the
    winner's intent record, and the winner's recovery finishes the winner's commit only."""
    store = open_store(str(tmp_path / "d"), faults=[])
    a, job_a = job_of(store, "error", name="v1")
    b, job_b = job_of(store, "error", name="v1")
    ma = run_tasks(a, job_a, {0: ["p=1/a0"], 1: ["p=2/a1"]})
    mb = run_tasks(b, job_b, {0: ["p=1/b0"]})
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="after", kinds=frozenset({Op.RENAME}), path_glob="*p=1*")
    )
    with pytest.raises(InjectedCrash):
        a.commit_job(job_a, ma)  # A decided, moved p=1, and "died" holding the claim
    fault_layer(store).armed = False
    live = {**read_claim(store).__dict__, "generation": "live-a", "host": "elsewhere"}
    store.write_bytes(CLAIM_FILE, Claim(**live).to_bytes())  # A, alive on another host
    with pytest.raises(DestinationClaimed):
        b.commit_job(job_b, mb)
    b.abort_job(job_b)
    assert load_intent(store, "_temporary/0").job_uuid == job_a.job_uuid
    # B touched nothing of A's half-done commit (p=1 moved, its file not yet renamed)
    assert visible(store) == ["p=1/a0.inflight"]
    old = time.time() - 1000
    os.utime(tmp_path / "d" / CLAIM_FILE, (old, old))  # now A went silent
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_forward and visible(store) == ["p=1/a0", "p=2/a1"]
    assert not store.exists("_temporary") and read_claim(store) is None


def test_a_phase_is_marked_only_beside_its_intent_record(tmp_path):
    """A holder overtaken after its commit was finished by the taker must not leave a phase
    marker where the record was: that would look like a decided commit whose record was lost."""
    from dataferry.commit.records.intent import mark_phase
    from dataferry.errors import CommitError

    store = open_store(str(tmp_path / "d"))
    with pytest.raises(CommitError, match="is gone"):
        mark_phase(store, "job", REPLACED_PHASE)
    assert not store.exists("job")
