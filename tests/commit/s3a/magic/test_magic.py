"""The magic committer against a real S3-protocol server (moto in its own process)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dataferry import make_committer
from dataferry.cli import app
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.s3a.magic.committer import (
    BASE,
    attempt_dir,
    base_dir,
    job_dir,
    pendingset_path,
)
from dataferry.engine import AttemptFailure, LocalEngine
from dataferry.errors import (
    ConfigError,
    DestinationError,
    InjectedCrash,
    JobCommitError,
    TaskCommitError,
)
from dataferry.store import FaultRule, Op, fault_layer, open_store
from dataferry.verify import invariants as inv
from dataferry.verify.reference import reference_tasks

from ...helpers import run_tasks as tasks_with
from ...helpers import visible


def test_nothing_visible_until_job_commit_and_nothing_copied(s3_url):
    store = open_store(s3_url)
    c = make_committer("magic", store, success_data=True)
    job = c.new_job()
    c.setup_job(job)
    msgs = tasks_with(c, job, {0: ["p=1/a", "p=2/b"], 1: ["p=1/c"]})
    assert visible(store) == []
    assert len(store.list_uploads("")) == 3
    result = c.commit_job(job, msgs)
    assert visible(store) == ["p=1/a", "p=1/c", "p=2/b"]
    assert store.read_bytes("p=1/c") == b"1:p=1/c"
    assert store.list_uploads("") == [] and not store.exists(job_dir(job))
    counters = store.stats.counters
    assert counters["op_multipart_complete"] == 3
    assert "op_copy" not in counters and "op_rename" not in counters  # zero rename, zero copy
    success = json.loads(store.read_bytes("_SUCCESS"))
    assert success["committer"].endswith("MagicCommitter") and len(success["filenames"]) == 3
    assert result.details["uploads_completed"] == 3


def test_pending_and_pendingset_shapes(s3_url):
    store = open_store(s3_url)
    c = make_committer("magic", store)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.write_file(t, "d=1/x.bin", b"abc")
    pending = json.loads(store.read_bytes(f"{base_dir(attempt_dir(t))}/d=1/x.bin.pending"))
    assert {
        "version",
        "filename",
        "uri",
        "uploadId",
        "bucket",
        "destinationKey",
        "created",
        "saved",
        "date",
        "jobId",
        "taskId",
        "text",
        "etags",
        "extraData",
        "iostatistics",
        "length",
    } <= set(pending)
    assert pending["destinationKey"].endswith("/d=1/x.bin") and pending["length"] == 3
    c.commit_task(t)
    pset = json.loads(store.read_bytes(pendingset_path(job, str(t.task_id))))
    assert pset["extraData"]["task.attempt.id"] == str(t.attempt_id) and len(pset["commits"]) == 1
    with pytest.raises(TaskCommitError, match="already committed"):
        c.commit_task(t)


def test_large_file_goes_up_in_parts(s3_url):
    store = open_store(s3_url)
    c = make_committer("magic", store, part_size=5 * 1024 * 1024)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    data = bytes(range(256)) * (48 * 1024)  # 12 MiB: parts of 5 + 7 MiB
    with c.open_file(t, "big.bin") as f:
        for i in range(0, len(data), 1 << 20):
            f.write(data[i : i + (1 << 20)])
    c.commit_job(job, [c.commit_task(t)])
    assert store.read_bytes("big.bin") == data
    assert store.stats.counter("op_multipart_upload_part") == 2


def test_speculative_and_dead_attempts_leave_no_upload(s3_url):
    store = open_store(s3_url)
    engine = LocalEngine(
        workers=0, speculate_tasks=(1,), failures=(AttemptFailure(2, 0, "after_write"),)
    )
    engine.run_job(make_committer("magic", store), reference_tasks())
    assert inv.check_output(store) == [] and inv.check_no_leftovers(store) == []
    assert store.list_uploads("") == []


def test_job_killed_before_commit_leaves_uploads_that_abort_removes(s3_url):
    store = open_store(s3_url)
    c = make_committer("magic", store)
    job = c.new_job()
    c.setup_job(job)
    tasks_with(c, job, {0: ["a", "b"]})
    assert len(store.list_uploads("")) == 2  # the driver "died" here
    runner = CliRunner()
    listed = runner.invoke(app, ["uploads", "list", s3_url, "--json"])
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)) == 2
    dry = runner.invoke(app, ["uploads", "abort", s3_url, "--older-than", "0", "--dry-run"])
    assert "would abort 2" in dry.output and len(store.list_uploads("")) == 2
    res = runner.invoke(app, ["uploads", "abort", s3_url, "--older-than", "0"])
    assert res.exit_code == 0 and store.list_uploads("") == []


def test_cleanup_aborts_a_dead_jobs_uploads_and_magic_dir(s3_url):
    store = open_store(s3_url)
    c = make_committer("magic", store)
    job = c.new_job()
    c.setup_job(job)
    tasks_with(c, job, {0: ["a"], 1: ["b"]})
    t = job.task(2)
    c.write_file(t, "c", b"uncommitted")  # an attempt that never committed
    report = cleanup_destination(store, older_than_s=0)
    assert report.removed == [job_dir(job)]
    assert store.list_uploads("") == [] and store.walk("") == []


@pytest.mark.parametrize("mode", ["fail", "append", "replace"])
def test_conflict_modes(s3_url, mode):
    store = open_store(s3_url)
    store.write_bytes("p=1/old", b"old")
    store.write_bytes("p=2/other", b"other")
    c = make_committer("magic", store, conflict_mode=mode)
    job = c.new_job()
    c.setup_job(job)
    msgs = tasks_with(c, job, {0: ["p=1/new"]})
    if mode == "fail":
        with pytest.raises(DestinationError, match=r"conflict mode 'fail'.*p=1/old"):
            c.commit_job(job, msgs)
        c.abort_job(job)
        assert visible(store) == ["p=1/old", "p=2/other"] and store.list_uploads("") == []
        return
    c.commit_job(job, msgs)
    expected = {"append": ["p=1/new", "p=1/old", "p=2/other"], "replace": ["p=1/new", "p=2/other"]}
    assert visible(store) == expected[mode]


def test_failed_completion_is_finished_once_the_store_recovers(s3_url):
    """Once its intent record is saved the commit is decided: a failed completion deletes
    nothing (the old code deleted the completed files, and with `replace` the partition ended
    with neither data set); abort finishes it when the store answers again."""
    store = open_store(s3_url, faults=[])
    c = make_committer("magic", store, threads=1)
    job = c.new_job()
    c.setup_job(job)
    msgs = tasks_with(c, job, {i: [f"f{i}"] for i in range(5)})
    rule = FaultRule(
        action="fail",
        kinds=frozenset({Op.MULTIPART_COMPLETE}),
        index=None,
        times=-1,
        predicate=lambda i, op, p: p == "f3",
    )
    fault_layer(store).add_rule(rule)
    with pytest.raises(JobCommitError, match="decided"):
        c.commit_job(job, msgs)
    assert visible(store) == ["f0", "f1", "f2"] and not store.exists("_SUCCESS")
    with pytest.raises(JobCommitError):
        c.abort_job(job)  # the store still fails: nothing is deleted or aborted
    assert visible(store) == ["f0", "f1", "f2"] and len(store.list_uploads("")) == 2
    rule.times = 0
    c.abort_job(job)
    assert visible(store) == [f"f{i}" for i in range(5)] and store.exists("_SUCCESS")
    assert store.list_uploads("") == [] and not any(
        e.name.startswith("__magic") for e in store.list("")
    )


def test_recovery_after_a_crash_mid_commit_finishes_it(s3_url):
    store = open_store(s3_url, faults=[])
    c = make_committer("magic", store, threads=1)
    job = c.new_job()
    c.setup_job(job)
    msgs = tasks_with(c, job, {i: [f"f{i}"] for i in range(4)})
    fault_layer(store).add_rule(
        FaultRule(
            action="crash",
            when="after",
            predicate=lambda i, op, p: op == Op.MULTIPART_COMPLETE and p == "f1",
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert visible(store) == ["f0", "f1"]
    make_committer("magic", store).abort_job(job)
    assert visible(store) == ["f0", "f1", "f2", "f3"] and store.exists("_SUCCESS")
    assert store.list_uploads("") == []


def test_auto_and_refusals(s3_url, tmp_path):
    assert make_committer("auto", s3_url).name == "magic"
    assert make_committer("auto", str(tmp_path)).name == "manifest"
    with pytest.raises(ConfigError, match="no atomic rename"):
        make_committer("manifest", s3_url)
    assert make_committer("v1", s3_url, allow_unsafe_rename=True).name == "v1"
    with pytest.raises(ConfigError, match="conflict_mode"):
        make_committer("magic", s3_url, conflict_mode="merge")


def test_the_referee_finds_nothing_on_the_s3_model():
    """The referee's every kind (a sample of each) on sim:s3, whose multipart upload model is
    shared between processes; `dataferry verify crash --committer magic` runs them all, here
    and against the S3 test server."""
    from dataferry.verify import verify_crash

    report = verify_crash(
        "magic",
        "sim:s3",
        every=3,
        driver_kills=3,
        zombies=True,
        zombie_points=2,
        concurrent_jobs=True,
        concurrent_points=1,
    )
    assert report.total_violations == 0, report.to_json(3)["examples"]
    assert report.outcomes.get("driver_crashed", 0) > 0
    assert report.driver_kills and report.zombie_schedules and report.concurrent_runs


def test_attempt_dying_after_its_task_commit_leaves_no_upload(s3_url):
    """Found by the full crash run: the first attempt saves its pendingset and dies; the retry
    overwrites the pendingset. The dead attempt's uploads must still be aborted."""
    store = open_store(s3_url, faults=[])
    # die at the very end of the first attempt's task commit (after any cleanup it does)
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="after", predicate=_last_commit_op_of_first_attempt())
    )
    LocalEngine(workers=0).run_job(make_committer("magic", store), reference_tasks())
    fault_layer(store).armed = False
    assert inv.check_output(store) == []
    assert store.list_uploads("") == []
    # and dying just after saving the pendingset, before anything else
    other = open_store(s3_url + "-2")
    engine = LocalEngine(workers=0, failures=(AttemptFailure(0, 0, "during_commit"),))
    engine.run_job(make_committer("magic", other), reference_tasks())
    assert inv.check_output(other) == [] and other.list_uploads("") == []


def _last_commit_op_of_first_attempt():
    """Crash after the last change task commit makes for task 0's first attempt: the pendingset
    write, or a delete of its records if task commit does one."""
    seen = {"pendingset": False}

    def pick(i, op, p):
        if op == Op.WRITE and p.endswith("_m_000000.pendingset"):
            seen["pendingset"] = True
            return False
        ends = ("_m_000000_0", f"_m_000000_0/{BASE}")  # the attempt's directory or its records
        return bool(seen["pendingset"] and op == Op.DELETE and p.endswith(ends))

    return pick


def test_the_claim_is_a_conditional_put_on_s3(s3_url):
    """Two magic jobs in error mode into one new S3 destination: the claim (If-None-Match PUT)
    lets one commit; the other gives way naming it, and none of its uploads completes."""
    from dataferry.commit.records.hold import CLAIM_FILE, Claim, acquire_claim
    from dataferry.errors import DestinationClaimed

    store = open_store(s3_url)
    assert store.create_if_absent("probe", b"1") and not store.create_if_absent("probe", b"2")
    store.delete("probe")
    a = make_committer("magic", store, mode="error")
    b = make_committer("magic", store, mode="error")
    ja, jb = a.new_job(), b.new_job()
    a.setup_job(ja)
    b.setup_job(jb)
    ma = tasks_with(a, ja, {0: ["a0"], 1: ["a1"]})
    mb = tasks_with(b, jb, {0: ["b0"]})
    holder = Claim(str(ja.job_id), ja.job_uuid, "magic", "error")
    held = acquire_claim(store, holder, wait_s=0, timeout_s=60, recover=None, heartbeat_s=0)
    with pytest.raises(DestinationClaimed, match=str(ja.job_id)):
        b.commit_job(jb, mb)
    b.abort_job(jb)
    assert store.read_bytes(CLAIM_FILE) == held.claim.to_bytes()
    a.commit_job(ja, ma)  # its own claim: the commit goes on
    held.stop_heartbeat()
    assert visible(store) == ["a0", "a1"] and store.list_uploads("") == []
    with pytest.raises(DestinationError, match="not empty"):
        jb2 = b.new_job()
        b.setup_job(jb2)
        b.commit_job(jb2, tasks_with(b, jb2, {0: ["b0"]}))


def test_replace_never_leaves_a_partition_with_neither_data_set(s3_url):
    """Conflict mode replace deletes the old objects once the commit is decided; a completion
    that fails then leaves the commit to be finished, never both data sets deleted."""
    store = open_store(s3_url, faults=[])
    store.write_bytes("p=1/old", b"old")
    c = make_committer("magic", store, threads=1, conflict_mode="replace")
    job = c.new_job()
    c.setup_job(job)
    msgs = tasks_with(c, job, {0: ["p=1/new0"], 1: ["p=1/new1"]})
    rule = FaultRule(
        action="fail",
        kinds=frozenset({Op.MULTIPART_COMPLETE}),
        times=-1,
        predicate=lambda i, op, p: p.endswith("new1"),
    )
    fault_layer(store).add_rule(rule)
    with pytest.raises(JobCommitError):
        c.commit_job(job, msgs)
    assert visible(store) == ["p=1/new0"]  # old replaced, new half there, no _SUCCESS
    assert not store.exists("_SUCCESS")
    rule.times = 0
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_forward and visible(store) == ["p=1/new0", "p=1/new1"]
    assert store.exists("_SUCCESS") and store.list_uploads("") == []


def test_task_commit_keeps_only_its_own_pendingset_and_the_chosen_attempt_survives(s3_url):
    """As S3A's task commit does, an attempt's markers and `.pending` records go at its task
    commit, leaving its claim and its own copy of the pendingset: job commit then deletes a
    few objects, not two per file. When a superseded attempt overwrites the task's pendingset
    after the chosen one, job commit still completes the chosen attempt's file from that copy
    and aborts the other's upload (broken: the task's output lost or the wrong one published,
    or an upload left billed)."""
    store = open_store(s3_url)
    c = make_committer("magic", store)
    job = c.new_job()
    c.setup_job(job)
    chosen, late = job.task(0, 0), job.task(0, 1)
    for attempt, data in ((chosen, b"chosen"), (late, b"late")):
        c.setup_task(attempt)
        c.write_file(attempt, "p=1/x", data)
    message = c.commit_task(chosen)
    assert sorted(st.name for st in store.walk(attempt_dir(chosen))) == [
        "_attempt",
        "_attempt.pendingset",
    ]
    c.commit_task(late)  # the last writer wins the task's pendingset
    c.commit_job(job, [message])
    assert visible(store) == ["p=1/x"] and store.read_bytes("p=1/x") == b"chosen"
    assert store.list_uploads("") == []
    assert not store.exists(job_dir(job))
