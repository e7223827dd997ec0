"""Fenced claims: a live holder is never overtaken, an overtaken one stops, cleanup leaves live
jobs alone, damaged claims and intent records never crash, spin or roll back a decided commit
(`commit/claim.py`, `jobcommit.py`, `recovery.py`, `intent.py`, `liveness.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.hold import (
    CLAIM_FILE,
    MIN_CLAIM_TIMEOUT_S,
    Claim,
    HeldClaim,
    Judge,
    acquire_claim,
    fence_path,
    observe_claim,
    read_claim,
    take_over,
)
from dataferry.commit.records.intent import INTENT_FILE, DamagedRecord, load_intent
from dataferry.errors import (
    ClaimLost,
    DestinationClaimed,
    InjectedCrash,
)
from dataferry.liveness import process_alive, process_start
from dataferry.store import FaultRule, Op, fault_layer, open_store
from dataferry.store.base import Store

from ..helpers import run_tasks, visible


def job_of(store, mode="append", name="manifest", **options):
    c = make_committer(name, store, mode=mode, **options)
    job = c.new_job()
    c.setup_job(job)
    return c, job


def age(store: Store, path: str, seconds: float) -> None:
    """Make a file look `seconds` old to the store (its modification time)."""
    full = os.path.join(store.root, path)
    t = time.time() - seconds
    os.utime(full, (t, t), follow_symlinks=False)


def remote_claim(**kw) -> Claim:
    """A live claim of a driver on another host (no process check applies)."""
    return Claim("job_remote_0001", "uuid-remote", "manifest", "overwrite", host="elsewhere", **kw)


class Gate(Store):
    """A store that holds the first rename into the destination until `release` is set, so a
    job commit can be caught in the middle of its publish stage."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner.url, inner.capabilities)
        self.inner = inner
        self.root = inner.root
        self.reached = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _rename(self, src, dst):
        if not dst.startswith("_") and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(30)
        return self.inner._rename(src, dst)

    def _stat(self, p):
        return self.inner._stat(p)

    def _list(self, p):
        return self.inner._list(p)

    def _walk(self, p):
        return self.inner._walk(p)

    def _mkdirs(self, p):
        return self.inner._mkdirs(p)

    def _delete(self, p, r):
        return self.inner._delete(p, r)

    def _copy(self, s, d):
        return self.inner._copy(s, d)

    def _read(self, p):
        return self.inner._read(p)

    def _write(self, p, data, overwrite):
        return self.inner._write(p, data, overwrite)

    def _create_if_absent(self, p, data):
        return self.inner._create_if_absent(p, data)

    def read_bytes(self, path, *args, **kwargs):
        return self.inner.read_bytes(path, *args, **kwargs)


def start_commit(c, job, msgs):
    """Run a job commit on a thread; returns (thread, outcome dict)."""
    out: dict = {}

    def run():
        try:
            out["result"] = c.commit_job(job, msgs)
        except BaseException as e:
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


# --- the holder's clock and the taker's timeout are not evidence ----------------------------


def test_a_holder_whose_clock_is_300_s_behind_is_not_taken_over(tmp_path):
    store = open_store(str(tmp_path / "d"))
    skewed = remote_claim(alive=time.time() - 300, acquired=time.time() - 300)
    store.write_bytes(CLAIM_FILE, skewed.to_bytes())  # renewed just now, by the store's clock
    c, job = job_of(store, "overwrite")
    msgs = run_tasks(c, job, {0: ["p=1/a"]})
    with pytest.raises(DestinationClaimed, match="job_remote_0001"):
        c.commit_job(job, msgs)
    assert read_claim(store).job_uuid == "uuid-remote" and visible(store) == []


def test_a_heartbeat_in_the_future_does_not_hold_the_destination_for_good(tmp_path):
    store = open_store(str(tmp_path / "d"))
    store.write_bytes(CLAIM_FILE, remote_claim(alive=time.time() + 10**6).to_bytes())
    age(store, CLAIM_FILE, 400)  # not renewed for 400 s by the store's clock
    c, job = job_of(store, "append")
    c.commit_job(job, run_tasks(c, job, {0: ["p=1/a"]}))
    assert visible(store) == ["p=1/a"] and read_claim(store) is None


def test_a_tiny_taker_timeout_does_not_overtake_a_holder_that_renews(tmp_path):
    inner = open_store(str(tmp_path / "d"))
    store = Gate(inner)
    a, job_a = job_of(store, "overwrite")
    ma = run_tasks(a, job_a, {0: ["p=1/a"], 1: ["p=2/a"]})
    t, out = start_commit(a, job_a, ma)
    assert store.reached.wait(10)  # A holds the claim and is publishing
    b, job_b = job_of(inner, "overwrite", claim_timeout_s=0.2)
    mb = run_tasks(b, job_b, {0: ["p=9/b"]})
    with pytest.raises(DestinationClaimed):
        b.commit_job(job_b, mb)
    store.release.set()
    t.join(30)
    assert "result" in out, out
    assert visible(inner) == ["p=1/a", "p=2/a"]


def test_the_minimum_lease_bounds_a_takers_timeout():
    assert Judge(open_store("memory://j"), 0.2).timeout_s == MIN_CLAIM_TIMEOUT_S


# --- an overtaken holder stops -----------------------------------------------------------------


def test_a_holder_overtaken_mid_commit_stops_and_the_taker_finishes_its_intent(tmp_path):
    inner = open_store(str(tmp_path / "d"))
    store = Gate(inner)
    a, job_a = job_of(store, "overwrite")
    ma = run_tasks(a, job_a, {0: ["p=1/a"], 1: ["p=2/a"]})
    t, out = start_commit(a, job_a, ma)
    assert store.reached.wait(10)
    # A is frozen past its lease: the store's clock says its claim was last renewed long ago
    age(inner, CLAIM_FILE, 10_000)
    b, job_b = job_of(inner, "append")
    mb = run_tasks(b, job_b, {0: ["p=3/b"]})
    b.commit_job(job_b, mb)  # takes over: finishes A's decided commit, then appends
    time.sleep(1.1)  # (A's batch-level check asks the store at most once a second)
    store.release.set()
    t.join(30)
    assert isinstance(out.get("error"), ClaimLost), out  # A reports failure, never success
    assert visible(inner) == ["p=1/a", "p=2/a", "p=3/b"]
    assert read_claim(inner) is None and not inner.exists("_temporary")


def test_a_fenced_generation_fails_the_holders_check(tmp_path):
    store = open_store(str(tmp_path / "d"))
    held = acquire_claim(store, remote_claim(), wait_s=0, timeout_s=60, recover=None, heartbeat_s=0)
    held.check("a step")
    store.create_if_absent(fence_path(held.claim.generation), b"{}")
    with pytest.raises(ClaimLost, match="fenced"):
        held.check("publishing")


def test_two_takers_racing_for_a_dead_claim_only_one_wins(tmp_path):
    store = open_store(str(tmp_path / "d"))
    store.write_bytes(CLAIM_FILE, remote_claim().to_bytes())
    age(store, CLAIM_FILE, 10_000)
    state = observe_claim(store)
    wins: list[HeldClaim] = []
    barrier = threading.Barrier(4)

    def take(i: int) -> None:
        barrier.wait()
        taker = Claim(f"job_t{i}_0001", f"uuid-t{i}", "manifest", "append")
        held = take_over(store, state, taker, Judge(store, 60), None, heartbeat_s=0)
        if held is not None:
            wins.append(held)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1
    assert read_claim(store).job_uuid == wins[0].claim.job_uuid
    wins[0].release()
    assert not store.exists("_dataferry")


# --- cleanup never touches a live job ---------------------------------------------------------


def test_cleanup_older_than_0_during_a_live_commit_leaves_it_to_finish(tmp_path):
    inner = open_store(str(tmp_path / "d"))
    old, old_job = job_of(inner, "append")
    old.commit_job(old_job, run_tasks(old, old_job, {0: ["p=0/old"]}))
    store = Gate(inner)
    a2, job_a2 = job_of(store, "overwrite")
    ma2 = run_tasks(a2, job_a2, {0: ["p=1/a"], 1: ["p=2/a"]})
    t, out = start_commit(a2, job_a2, ma2)
    assert store.reached.wait(10)
    report = cleanup_destination(inner, older_than_s=0)
    assert CLAIM_FILE in report.left and not report.rolled_back and not report.rolled_forward
    store.release.set()
    t.join(30)
    assert "result" in out, out
    assert visible(inner) == ["p=1/a", "p=2/a"]


def test_cleanup_recovers_a_dead_holder_without_waiting_for_the_age(tmp_path):
    store = open_store(str(tmp_path / "d"), faults=[])
    c, job = job_of(store, "append", io_threads=1)
    msgs = run_tasks(c, job, {0: ["p=1/a", "p=2/b"]})
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="after", kinds=frozenset({Op.RENAME}), times=1)
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    report = cleanup_destination(store)  # the default age: the holder is known dead
    assert report.rolled_forward and visible(store) == ["p=1/a", "p=2/b"]
    assert read_claim(store) is None


# --- damaged claims ----------------------------------------------------------------------------


DAMAGED = {
    "wrong types": json.dumps({"job_id": 7, "job_uuid": [], "committer": "manifest", "mode": 1}),
    "unknown committer": remote_claim().to_bytes().decode().replace("manifest", "nosuch"),
    "truncated": remote_claim().to_bytes().decode()[:40],
}


@pytest.mark.parametrize("kind", [*DAMAGED, "a directory", "200 MB"])
def test_a_damaged_claim_gives_one_named_answer_and_is_taken_over_by_age(tmp_path, kind):
    store = open_store(str(tmp_path / "d"))
    if kind == "a directory":
        store.mkdirs(f"{CLAIM_FILE}/inside")
    elif kind == "200 MB":
        store.write_bytes(CLAIM_FILE, b"{")
        os.truncate(os.path.join(store.root, CLAIM_FILE), 200 * 1024 * 1024)
    else:
        store.write_bytes(CLAIM_FILE, DAMAGED[kind].encode())
    state = observe_claim(store)
    assert state is not None and state.claim is None and state.problem
    c, job = job_of(store, "overwrite")
    msgs = run_tasks(c, job, {0: ["p=1/a"]})
    start = time.process_time()
    with pytest.raises(DestinationClaimed, match="damaged claim"):
        c.commit_job(job, msgs)  # fresh: unknown state, left alone (no crash, no spin)
    assert time.process_time() - start < 2
    report = cleanup_destination(store)
    assert CLAIM_FILE in report.left and "damaged" in report.left[CLAIM_FILE]
    age(store, CLAIM_FILE, 10_000)
    c.commit_job(job, msgs)  # past the age: taken over
    assert visible(store) == ["p=1/a"] and read_claim(store) is None


# --- damaged intent records ---------------------------------------------------------------------


def test_a_truncated_intent_after_the_decision_is_left_in_place_never_rolled_back(tmp_path):
    store = open_store(str(tmp_path / "d"), faults=[])
    old, old_job = job_of(store, "append")
    old.commit_job(old_job, run_tasks(old, old_job, {0: ["p=0/old"]}))
    c, job = job_of(store, "overwrite", io_threads=1)
    msgs = run_tasks(c, job, {0: [f"p=1/f{i}" for i in range(20)]})
    fault_layer(store).add_rule(
        FaultRule(
            action="crash", when="after", kinds=frozenset({Op.RENAME}), path_glob="*f5.*inflight"
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    before = visible(store)
    intent = f"{c.job_dir(job)}/{INTENT_FILE}"
    raw = store.read_bytes(intent)
    store.write_bytes(intent, raw[: len(raw) // 2])
    with pytest.raises(DamagedRecord, match="left in place"):
        load_intent(store, c.job_dir(job))
    report = cleanup_destination(store)
    assert report.failed and "_commit_intent.json" in next(iter(report.failed.values()))
    assert visible(store) == before and store.exists(intent)  # nothing rolled back


# --- one liveness check --------------------------------------------------------------------------


def test_a_zombie_process_is_dead():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while process_start(child.pid) != "zombie" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not process_alive(child.pid, "")  # exited, not yet reaped
    child.wait()
    assert process_alive(os.getpid(), process_start(os.getpid()))


def test_on_a_read_only_destination_the_error_names_the_rename_not_the_claim(tmp_path):
    """Every write is refused after the claim was taken (a file system gone read-only): the
    job's error is the first failing operation, not the claim's release behind it."""
    store = open_store(str(tmp_path / "d"), faults=[])
    c, job = job_of(store, "append", io_threads=1)
    msgs = run_tasks(c, job, {0: ["p=1/a"]})
    mutating = frozenset({Op.RENAME, Op.WRITE, Op.DELETE, Op.MKDIRS, Op.CREATE_IF_ABSENT})
    fault_layer(store).add_rule(
        FaultRule(action="deny", kinds=mutating, path_glob="*p=1*", times=-1)
    )
    fault_layer(store).add_rule(
        FaultRule(
            action="deny",
            kinds=frozenset({Op.WRITE, Op.DELETE}),
            path_glob="_dataferry/*",
            times=-1,
        )
    )
    with pytest.raises(Exception) as failed:
        c.commit_job(job, msgs)
    text = str(failed.value)
    assert "p=1" in text and "claim.json" not in text, text


# --- driver records: cleanup knows which jobs run ----------------------------------------------


def test_cleanup_leaves_a_job_whose_driver_is_alive_and_recovers_one_known_dead(tmp_path):
    from dataferry.commit.job.commit import record_job_driver
    from dataferry.commit.records.drivers import driver_path, end_driver

    store = open_store(str(tmp_path / "d"))
    live, live_job = job_of(store, "append")
    run_tasks(live, live_job, {0: ["p=1/a"]})
    record_job_driver(live, live_job)  # this process: alive, still writing its tasks
    report = cleanup_destination(store, older_than_s=0)
    assert any("driver is alive" in why for why in report.left.values()), report
    assert not report.rolled_back and store.exists(live.job_dir(live_job))
    end_driver(store, live_job.job_uuid)
    assert not store.exists(driver_path(live_job.job_uuid))

    dead, dead_job = job_of(store, "append")
    run_tasks(dead, dead_job, {0: ["p=2/b"]})
    record = Claim(str(dead_job.job_id), dead_job.job_uuid, "manifest", "append", pid=dead_pid())
    store.write_bytes(driver_path(dead_job.job_uuid), record.to_bytes())
    report = cleanup_destination(store)  # the default age: its driver is known dead
    assert dead.job_dir(dead_job) in report.rolled_back, report
    assert not store.exists(dead.job_dir(dead_job)) and not store.exists(
        driver_path(dead_job.job_uuid)
    )


def dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(p.stdout)


def test_an_overwrite_into_a_linked_partition_is_refused_before_it_replaces_anything(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"mine")
    store = open_store(str(tmp_path / "d"))
    old, old_job = job_of(store, "append")
    old.commit_job(old_job, run_tasks(old, old_job, {0: ["p=0/old"]}))
    os.symlink(outside, tmp_path / "d" / "p=9")
    c, job = job_of(store, "overwrite")
    msgs = run_tasks(c, job, {0: ["p=9/new"]})
    from dataferry.errors import DestinationError

    with pytest.raises(DestinationError, match="symbolic link"):
        c.commit_job(job, msgs)
    assert [f for f in visible(store) if f != "p=9"] == ["p=0/old"]  # the earlier set, whole
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]


def test_an_overtaken_holders_late_renewal_never_lets_it_remove_the_takers_claim(tmp_path):
    """A renewal that hangs in the store (seen on Azurite, stalled for minutes) lands after
    a taker fenced the holder and put its own record in place: the record names the holder's
    generation again. The taker reads that as the holder's late write, and its own next
    renewal puts its record back. Were the holder then to judge the claim its own by the
    generation alone, its release would delete the record, and the taker, mid-publish, would
    stop with ClaimLost leaving half its files visible."""
    store = open_store(str(tmp_path / "d"))
    holder = acquire_claim(
        store, remote_claim(lease_s=5), wait_s=0, timeout_s=5, recover=None, heartbeat_s=0
    )
    state = observe_claim(store)
    taker = Claim("job_taker_0001", "uuid-taker", "manifest", "overwrite")
    held = take_over(store, state, taker, Judge(store, 5), None, heartbeat_s=0)
    assert held is not None
    store.write_bytes(CLAIM_FILE, holder.claim.to_bytes())  # the holder's late renewal lands

    holder.release()
    holder.abandon()
    assert read_claim(store).job_uuid == "uuid-remote"  # untouched by the overtaken holder
    held.check("publishing")  # the taker goes on
    held._renew("heartbeat")
    assert read_claim(store).job_uuid == "uuid-taker"
    held.release()
