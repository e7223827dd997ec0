"""The staging committers `directory` and `partitioned`, on the S3 model (sim:s3, no latency)
and against a real S3-protocol server (moto in its own process)."""

from __future__ import annotations

import json
import os

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.s3a.staging import layout
from dataferry.commit.s3a.staging.records import UploadsRecord
from dataferry.errors import CommitError, DestinationError, InjectedCrash, TaskCommitError
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ...helpers import run_tasks as commit_tasks
from ...helpers import visible

MiB = 1024 * 1024


@pytest.fixture(params=["sim-s3", "s3"])
def dest(request, tmp_path):
    """A fresh destination URL on the S3 model or the S3 test server."""
    if request.param == "s3":
        return request.getfixturevalue("s3_url")
    return f"sim:s3:{tmp_path / 'dest'}"


def store_of(url, **kw):
    if url.startswith("sim:"):
        kw.setdefault("latency_scale", 0.0)
    return open_store(url, **kw)


def staging(tmp_path):
    return str(tmp_path / "staging")


@pytest.mark.parametrize("name", ["directory", "partitioned"])
def test_nothing_visible_until_job_commit_and_nothing_copied(dest, tmp_path, name):
    store = store_of(dest)
    c = make_committer(name, store, staging_dir=staging(tmp_path), success_data=True)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "p=1/a", b"0:p=1/a")
    local = layout.local_attempt_dir(staging(tmp_path), t)
    assert os.path.exists(os.path.join(local, "p=1", "a"))  # task output is on local disk
    assert store.list_uploads("") == [] and visible(store) == []
    msgs = [c.commit_task(t), *commit_tasks(c, job, {1: ["p=1/c", "p=2/b"]})]
    assert not os.path.exists(local)  # uploaded, then removed
    assert visible(store) == [] and len(store.list_uploads("")) == 3
    assert msgs[0].extra["bytes_uploaded"] == len(b"0:p=1/a")
    before = dict(store.stats.counters)
    result = c.commit_job(job, msgs)
    assert visible(store) == ["p=1/a", "p=1/c", "p=2/b"]
    assert store.read_bytes("p=2/b") == b"1:p=2/b"
    assert store.list_uploads("") == [] and not store.exists(layout.jobs_dir(job))
    during = {k: v - before.get(k, 0) for k, v in store.stats.counters.items()}
    assert during.get("op_multipart_complete") == 3
    assert not during.get("op_copy") and not during.get("op_rename")  # zero copy at job commit
    assert not during.get("op_multipart_upload_part")
    success = json.loads(store.read_bytes("_SUCCESS"))
    assert success["committer"].endswith(
        "DirectoryStagingCommitter" if name == "directory" else "PartitionedStagingCommitter"
    )
    assert len(success["filenames"]) == 3 and result.details["uploads_completed"] == 3


def test_large_files_go_up_in_parts_no_smaller_than_the_stores_minimum(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    c = make_committer("directory", store, staging_dir=staging(tmp_path), part_size=5 * MiB)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    big = os.urandom(1024) * (11 * 1024 + 7)  # 11 MiB and a bit: parts of 5, 5 and 1 MiB
    c.write_file(t, "big.bin", big)
    c.write_file(t, "empty.bin", b"")
    msg = c.commit_task(t)
    pset = json.loads(store.read_bytes(layout.pendingset_path(job, msg.attempt_id)))
    etags = {p["destinationKey"].rsplit("/", 1)[-1]: p["etags"] for p in pset["commits"]}
    assert len(etags["big.bin"]) == 3 and len(etags["empty.bin"]) == 1
    c.commit_job(job, [msg])
    assert store.read_bytes("big.bin") == big and store.read_bytes("empty.bin") == b""


def test_part_size_below_the_s3_minimum_is_refused(tmp_path):
    from dataferry.errors import ConfigError

    with pytest.raises(ConfigError, match="part_size"):
        make_committer("directory", f"sim:s3:{tmp_path}", part_size=MiB)


def test_store_without_multipart_is_refused(tmp_path):
    c = make_committer("partitioned", str(tmp_path / "d"))
    with pytest.raises(CommitError, match="multipart"):
        c.setup_job(c.new_job())


@pytest.mark.parametrize("mode", ["fail", "append", "replace"])
def test_directory_conflict_mode_covers_the_whole_destination(tmp_path, mode):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    store.write_bytes("p=1/old", b"old")
    store.write_bytes("p=9/other", b"other")
    c = make_committer("directory", store, conflict_mode=mode, staging_dir=staging(tmp_path))
    job = c.new_job()
    if mode == "fail":
        with pytest.raises(DestinationError, match="conflict mode 'fail'"):
            c.setup_job(job)  # refused before any task runs
        return
    c.setup_job(job)
    c.commit_job(job, commit_tasks(c, job, {0: ["p=1/new"]}))
    expected = {
        "append": ["p=1/new", "p=1/old", "p=9/other"],
        "replace": ["p=1/new"],  # the partition it did not write goes too
    }
    assert visible(store) == expected[mode]


@pytest.mark.parametrize("mode", ["fail", "append", "replace"])
def test_partitioned_conflict_mode_covers_only_the_partitions_written(tmp_path, mode):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    for p in ("p=1/old", "p=9/other", "root-file"):
        store.write_bytes(p, p.encode())
    c = make_committer("partitioned", store, conflict_mode=mode, staging_dir=staging(tmp_path))
    job = c.new_job()
    c.setup_job(job)
    msgs = commit_tasks(c, job, {0: ["p=1/new", "top"]})
    if mode == "fail":
        with pytest.raises(DestinationError, match=r"conflict mode 'fail'.*p=1/old"):
            c.commit_job(job, msgs)
        c.abort_job(job)
        assert visible(store) == ["p=1/old", "p=9/other", "root-file"]
        assert store.list_uploads("") == []
        return
    c.commit_job(job, msgs)
    expected = {
        "append": ["p=1/new", "p=1/old", "p=9/other", "root-file", "top"],
        "replace": ["p=1/new", "p=9/other", "root-file", "top"],  # root files: always append
    }
    assert visible(store) == expected[mode]


def test_partitioned_fail_mode_ignores_data_outside_the_partitions_written(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    store.write_bytes("p=9/other", b"other")
    c = make_committer("partitioned", store, conflict_mode="fail", staging_dir=staging(tmp_path))
    job = c.new_job()
    c.setup_job(job)
    c.commit_job(job, commit_tasks(c, job, {0: ["p=1/new"]}))
    assert visible(store) == ["p=1/new", "p=9/other"]


def test_abort_task_deletes_local_files_and_aborts_its_uploads(dest, tmp_path):
    store = store_of(dest)
    c = make_committer("directory", store, staging_dir=staging(tmp_path))
    job = c.new_job()
    c.setup_job(job)
    keep = commit_tasks(c, job, {0: ["a"]})
    t = job.task(1)
    c.setup_task(t)
    c.write_file(t, "b", b"b")
    c.commit_task(t)  # committed, then the driver decides against it (a speculative loser)
    assert len(store.list_uploads("")) == 2
    c.abort_task(t)
    assert not os.path.exists(layout.local_attempt_dir(staging(tmp_path), t))
    assert [u.path for u in store.list_uploads("")] == ["a"]
    assert not store.exists(layout.uploads_record(t))
    c.commit_job(job, keep)
    assert visible(store) == ["a"] and store.list_uploads("") == []


def test_a_failed_task_commit_aborts_what_it_started(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}", faults=[])
    c = make_committer("directory", store, staging_dir=staging(tmp_path), upload_threads=1)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    for n in ("a", "b", "c"):
        c.write_file(t, n, n.encode())
    fault_layer(store).add_rule(
        FaultRule(
            action="fail", kinds=frozenset({Op.MULTIPART_PART}), predicate=lambda i, o, p: p == "b"
        )
    )
    with pytest.raises(Exception, match="injected"):
        c.commit_task(t)
    assert store.list_uploads("") == []


def test_abort_job_aborts_every_upload_and_leaves_nothing(dest, tmp_path):
    store = store_of(dest)
    store.write_bytes("old", b"old")
    c = make_committer("partitioned", store, staging_dir=staging(tmp_path))
    job = c.new_job()
    c.setup_job(job)
    commit_tasks(c, job, {0: ["p=1/a"], 1: ["p=2/b"]})
    t = job.task(2)
    c.setup_task(t)
    c.write_file(t, "p=3/c", b"c")  # written locally, never committed
    c.abort_job(job)
    assert store.list_uploads("") == [] and visible(store) == ["old"]
    assert [e.name for e in store.list("")] == ["old"]
    assert not os.path.exists(layout.local_job_dir(staging(tmp_path), job))


def test_an_attempt_that_died_before_recording_its_upload_ids_is_cleaned_by_key(tmp_path):
    """Killed between starting its uploads and naming them: the record holds the keys only,
    and the job's cleanup aborts what is pending at those keys once the job is over."""
    store = store_of(f"sim:s3:{tmp_path / 'dest'}", faults=[])
    c = make_committer("directory", store, staging_dir=staging(tmp_path))
    job = c.new_job()
    c.setup_job(job)
    msgs = commit_tasks(c, job, {0: ["a"]})
    dead = job.task(1)
    c.setup_task(dead)
    c.write_file(dead, "b", b"b")
    writes = []

    def second_record_write(i, op, path):
        # the first record write (keys) is let through; the second (ids) kills the attempt
        if op == Op.WRITE and path == layout.uploads_record(dead):
            writes.append(i)
            return len(writes) == 2
        return False

    fault_layer(store).add_rule(FaultRule(action="crash", predicate=second_record_write))
    with pytest.raises(InjectedCrash):
        c.commit_task(dead)
    fault_layer(store).armed = False
    record = UploadsRecord.load(store, layout.uploads_record(dead))
    assert record is not None and record.keys == ["b"] and record.uploads == {}
    assert sorted(u.path for u in store.list_uploads("")) == ["a", "b"]
    c.abort_task(dead)  # the engine gives up on it: its record stays, naming the key
    assert store.exists(layout.uploads_record(dead))
    c.commit_job(job, msgs)
    assert visible(store) == ["a"] and store.list_uploads("") == []


def test_a_zombie_that_uploads_after_the_job_is_cleaned_up_by_cleanup(dest, tmp_path):
    store = store_of(dest)
    c = make_committer("directory", store, staging_dir=staging(tmp_path))
    on_another_host = make_committer("directory", store, staging_dir=str(tmp_path / "other"))
    job = c.new_job()
    c.setup_job(job)
    zombie = job.task(0, 0)
    on_another_host.setup_task(zombie)
    on_another_host.write_file(zombie, "a", b"zombie")
    msgs = commit_tasks(c, job, {0: ["a"]}, attempt=1)
    c.commit_job(job, msgs)
    on_another_host.commit_task(zombie)  # after the job: its uploads and records are orphans
    assert store.read_bytes("a") == b"0:a"
    assert len(store.list_uploads("")) == 1
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_back and store.list_uploads("") == []
    assert store.read_bytes("a") == b"0:a" and visible(store) == ["a"]
    assert not os.path.exists(layout.local_attempt_dir(str(tmp_path / "other"), zombie))
    assert not any(e.name.startswith(layout.STAGING_PREFIX) for e in store.list(""))


def test_cleanup_aborts_uploads_no_job_names_only_when_old_enough(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    upload = store.initiate_upload("p=1/orphan")
    assert cleanup_destination(store, older_than_s=3600).uploads_aborted == []
    assert len(store.list_uploads("")) == 1
    assert cleanup_destination(store, older_than_s=0).uploads_aborted == ["p=1/orphan"]
    assert store.list_uploads("") == [] and upload


def test_cleanup_spares_uploads_while_an_upload_job_is_in_the_destination(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    c = make_committer("directory", store, staging_dir=staging(tmp_path))
    job = c.new_job()
    c.setup_job(job)
    commit_tasks(c, job, {0: ["a"]})
    report = cleanup_destination(store, older_than_s=3600)  # the job is young: left alone
    assert report.skipped_recent and report.uploads_aborted == []
    assert len(store.list_uploads("")) == 1


def test_pendingsets_in_another_store(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    elsewhere = str(tmp_path / "pendingsets")
    c = make_committer("directory", store, staging_dir=staging(tmp_path), pendingset_dir=elsewhere)
    job = c.new_job()
    c.setup_job(job)
    msgs = commit_tasks(c, job, {0: ["a"], 1: ["b"]})
    saved = open_store(elsewhere)
    assert len([s for s in saved.walk("") if s.path.endswith(".pendingset")]) == 2
    assert not any(s.path.endswith(".pendingset") for s in store.walk(""))
    c.commit_job(job, msgs)
    assert visible(store) == ["a", "b"] and saved.walk("") == []


def test_attempt_set_up_twice_or_committed_twice_is_refused(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    c = make_committer("directory", store, staging_dir=staging(tmp_path))
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    with pytest.raises(CommitError, match="already set up"):
        c.setup_task(t)
    c.write_file(t, "a", b"a")
    c.commit_task(t)
    with pytest.raises(TaskCommitError, match="already committed"):
        c.commit_task(t)


def test_recovery_after_a_crash_mid_commit_finishes_it(tmp_path):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}", faults=[])
    c = make_committer("partitioned", store, staging_dir=staging(tmp_path), threads=1)
    job = c.new_job()
    c.setup_job(job)
    msgs = commit_tasks(c, job, {i: [f"p={i}/f"] for i in range(4)})
    fault_layer(store).add_rule(
        FaultRule(
            action="crash",
            when="after",
            predicate=lambda i, op, p: op == Op.MULTIPART_COMPLETE and p == "p=1/f",
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert len(visible(store)) == 2
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_forward
    assert visible(store) == [f"p={i}/f" for i in range(4)] and store.exists("_SUCCESS")
    assert store.list_uploads("") == []


@pytest.mark.parametrize("name", ["directory", "magic"])
def test_cleanup_job_alone_aborts_every_upload_of_the_job(tmp_path, name):
    store = store_of(f"sim:s3:{tmp_path / 'dest'}")
    options = {"staging_dir": staging(tmp_path)} if name == "directory" else {}
    c = make_committer(name, store, **options)
    job = c.new_job()
    c.setup_job(job)
    commit_tasks(c, job, {0: ["p=1/a"], 1: ["p=2/b"]})
    assert len(store.list_uploads("")) == 2
    c.cleanup_job(job)  # no abort_job first
    assert store.list_uploads("") == [] and store.list("") == []
