"""Manifest committer behaviour, bad input and recovery, through real stores and faults."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import tracemalloc

import pytest

from dataferry import make_committer
from dataferry.commit.manifest.carried import CARRIED, carry
from dataferry.commit.manifest.files import DirEntry, EntryStatus, TaskManifest
from dataferry.commit.manifest.layout import JobLayout
from dataferry.commit.manifest.stages.create_dirs import leaf_directories
from dataferry.commit.protocol.inflight import published_name
from dataferry.commit.records.success import read_success
from dataferry.errors import CommitError, JobCommitError, TaskCommitError, ValidationError
from dataferry.store import FaultRule, Op, WrappingStore, fault_layer, open_store

from ..helpers import run_tasks, visible
from .helpers import new_job


def test_layout_is_hadoops(store):
    c, job = new_job(store)
    t = job.task(3, 1)
    layout = JobLayout.of(job)
    assert c.task_work_path(t) == f"_temporary/{job.job_uuid}/00/tasks/{t.attempt_id}"
    assert layout.manifest_path(str(t.task_id)) == (
        f"_temporary/{job.job_uuid}/00/manifests/{t.task_id}-manifest.json"
    )
    assert layout.manifest_tmp_path(str(t.attempt_id)).endswith(f"{t.attempt_id}-manifest.json.tmp")


def test_end_to_end_with_json_success(store):
    c, job = new_job(store, success_data=True)
    msgs = run_tasks(c, job, {0: ["p=1/a", "p=2/b"], 1: ["p=1/c", "top"]})
    assert visible(store) == []  # nothing visible after task commit only
    result = c.commit_job(job, msgs)
    assert visible(store) == ["p=1/a", "p=1/c", "p=2/b", "top"]
    assert store.read_bytes("p=1/c") == b"1:p=1/c"
    marker = read_success(store)
    assert marker.data.job_id == job.job_uuid
    assert marker.data.metrics["committer_files_committed"] == 4
    assert len(marker.data.filenames) == 4
    assert set(result.stage_seconds) >= {
        "load_manifests",
        "create_directories",
        "rename_files",
        "save_success",
        "cleanup",
    }
    assert result.details["cleanup"] == "parallel delete"
    assert not store.exists("_temporary")


def test_last_attempt_to_commit_wins(store):
    c, job = new_job(store)
    first, second = job.task(0, 0), job.task(0, 1)
    for t, name in ((first, "old"), (second, "new")):
        c.setup_task(t)
        c.write_file(t, f"p/{name}", name.encode())
        c.commit_task(t)
    manifest = TaskManifest.from_bytes(
        store.read_bytes(JobLayout.of(job).manifest_path(str(first.task_id))), store, "m"
    )
    assert manifest.task_attempt_id == str(second.attempt_id)
    # the driver committed the second attempt: exactly its file appears
    c.commit_job(job, [_message(second, c, store)])
    assert visible(store) == ["p/new"]


def _message(task, committer, store):
    from dataferry.commit.protocol import TaskCommitMessage

    return TaskCommitMessage(
        str(task.job.job_id), str(task.task_id), str(task.attempt_id), "manifest"
    )


def test_a_later_attempts_manifest_does_not_replace_the_chosen_attempts_files(store):
    """A zombie: attempt 1 was given up, but commits after attempt 0 (the one the driver
    chose) and overwrites the task's manifest. The job commits attempt 0's files, rebuilt from
    its own directory, and nothing of attempt 1."""
    c, job = new_job(store)
    a0, a1 = job.task(0, 0), job.task(0, 1)
    for t in (a0, a1):
        c.setup_task(t)
        c.write_file(t, f"f{t.attempt_number}", b"x")
        c.commit_task(t)
    c.commit_job(job, [_message(a0, c, store)])
    assert visible(store) == ["f0"]
    assert c.stats.counter("committer_task_manifests_rebuilt") == 1


def test_committing_twice_or_after_abort_fails_clearly(store):
    c, job = new_job(store)
    t = job.task(0)
    c.setup_task(t)
    c.commit_task(t)
    with pytest.raises(TaskCommitError, match="already committed"):
        c.commit_task(t)
    aborted = job.task(1)
    c.setup_task(aborted)
    c.write_file(aborted, "x", b"1")
    c.abort_task(aborted)
    with pytest.raises(TaskCommitError, match="never set up, or was aborted"):
        c.commit_task(aborted)


def test_job_id_reuse_and_task_setup_twice_refused(store):
    c, job = new_job(store)
    with pytest.raises(CommitError, match="already exists"):
        c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    with pytest.raises(CommitError, match="already exists"):
        c.setup_task(t)


def test_concurrent_tasks_into_one_subdirectory_make_no_nested_copies(store):
    c, job = new_job(store, io_threads=8)
    msgs = run_tasks(c, job, {i: [f"sub/part-{i}"] for i in range(20)})
    c.commit_job(job, msgs)
    assert visible(store) == sorted(f"sub/part-{i}" for i in range(20))
    assert not store.exists("sub/sub")


def test_leaf_directories_only():
    dirs = {
        d: DirEntry(d, EntryStatus.NOT_FOUND, d.count("/") + 1)
        for d in ("a", "a/b", "a/b/c", "x", "a/d")
    }
    assert sorted(d.dest for d in leaf_directories(dirs)) == ["a/b/c", "a/d", "x"]


def test_directories_known_to_exist_cost_nothing_and_files_in_the_way_go(store):
    store.write_bytes("existing/old", b"old")
    c, job = new_job(store)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "existing/new", b"n")
    c.write_file(t, "blocker/inside", b"i")
    msg = c.commit_task(t)
    store.write_bytes("blocker", b"a file where a directory must be")  # after task commit
    mkdirs_before = store.stats.counter("op_mkdirs")
    c.commit_job(job, [msg])
    assert visible(store) == ["blocker/inside", "existing/new", "existing/old"]
    # 'existing' was seen as a directory at task commit: only 'blocker' needed a mkdirs
    assert store.stats.counter("op_mkdirs") - mkdirs_before <= 2


def test_rename_failing_mid_stage_is_finished_by_abort_once_the_store_recovers(tmp_path):
    """Past its intent record a commit is decided: abort finishes it rather than leaving half
    of it visible, and while the store still fails it leaves everything in place."""
    store = open_store(str(tmp_path / "out"), faults=[])
    c, job = new_job(store, io_threads=1, success_data=True)
    msgs = run_tasks(c, job, {i: [f"p/f{i}"] for i in range(6)})
    rule = FaultRule(
        action="fail",
        kinds=frozenset({Op.RENAME}),
        path_glob="_temporary/*/tasks/*",
        times=-1,
        predicate=lambda i, op, p: published_name(p).endswith("/f3"),  # (named in flight)
    )
    fault_layer(store).add_rule(rule)
    with pytest.raises(JobCommitError, match="rename_files"):
        c.commit_job(job, msgs)
    assert not store.exists("_SUCCESS")
    assert len(visible(store)) == 3  # partial, but no _SUCCESS claims otherwise
    with pytest.raises(JobCommitError):
        c.abort_job(job)  # the store still fails: nothing is deleted
    assert len(visible(store)) == 3 and store.exists("_temporary")
    rule.times = 0  # the store recovers
    c.abort_job(job)
    assert visible(store) == [f"p/f{i}" for i in range(6)]
    assert read_success(store).data.job_id == job.job_uuid
    c.cleanup_job(job)
    c.abort_job(job)  # idempotent
    assert not store.exists("_temporary") and not store.exists("_dataferry")


def test_ambiguous_rename_is_recovered_by_etag(tmp_path):
    store = open_store(
        f"sim:abfs:{tmp_path / 'out'}",
        faults=[
            FaultRule(
                action="ambiguous",
                when="after",
                kinds=frozenset({Op.RENAME}),
                path_glob="_temporary/*/tasks/*",
                times=2,
            )
        ],
        latency_scale=0,
    )
    c, job = new_job(store)
    msgs = run_tasks(c, job, {0: ["a", "b", "c"]})
    result = c.commit_job(job, msgs)
    assert result.details["recovered_renames"] == 2
    assert visible(store) == ["a", "b", "c"]
    assert c.stats.counter("commit_file_rename_recovered") == 2


def test_ambiguous_rename_that_did_not_happen_is_retried(tmp_path):
    store = open_store(
        str(tmp_path / "out"),
        faults=[
            FaultRule(
                action="ambiguous",
                when="before",
                kinds=frozenset({Op.RENAME}),
                path_glob="_temporary/*/tasks/*",
                times=1,
            )
        ],
    )
    c, job = new_job(store, io_threads=1)
    result = c.commit_job(job, run_tasks(c, job, {0: ["a"]}))
    assert result.details["recovered_renames"] == 0 and visible(store) == ["a"]


def test_validate_output_catches_a_changed_file_before_success(tmp_path):
    store = open_store(str(tmp_path / "out"), faults=[])
    c, job = new_job(store, validate_output=True, io_threads=1)
    msgs = run_tasks(c, job, {0: ["a"]})
    # another writer appends to the task's file after its manifest recorded size and etag
    path = c.attempt_path(job.task(0), "a")
    store.write_bytes(path, b"changed behind the committer's back")
    with pytest.raises(JobCommitError, match="bytes, expected"):
        c.commit_job(job, msgs)
    assert not store.exists("_SUCCESS")


def test_two_jobs_into_one_destination_and_siblings_do_not_interfere(tmp_path):
    store = open_store(str(tmp_path / "out"))
    c1, j1 = new_job(store)
    c2, j2 = new_job(store)
    m1 = run_tasks(c1, j1, {0: ["p=1/job1"]})
    m2 = run_tasks(c2, j2, {0: ["p=1/job2"]})
    c1.commit_job(j1, m1)
    assert store.exists(f"_temporary/{j2.job_uuid}")  # job 2's work survives job 1's cleanup
    c2.commit_job(j2, m2)
    assert visible(store) == ["p=1/job1", "p=1/job2"]
    assert not store.exists("_temporary")
    sib = [open_store(str(tmp_path / f"sib{i}")) for i in range(2)]
    jobs = [new_job(s) for s in sib]
    msgs = [run_tasks(c, j, {0: [f"x{i}"]}) for i, (c, j) in enumerate(jobs)]
    for (c, j), m in zip(jobs, msgs, strict=True):
        c.commit_job(j, m)
    assert visible(sib[0]) == ["x0"] and visible(sib[1]) == ["x1"]


def _forge(store, job, mutate, carried=False):
    """A task whose manifest is forged: the saved file, and the copy its commit message
    carries (`carried`) or no copy in the message (as for a manifest too large to carry)."""
    c = make_committer("manifest", store)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "ok", b"1")
    msg = c.commit_task(t)
    path = JobLayout.of(job).manifest_path(str(t.task_id))
    data = json.loads(store.read_bytes(path))
    mutate(data, store)
    store.write_bytes(path, json.dumps(data).encode())
    extra = {k: v for k, v in msg.extra.items() if k != CARRIED}
    if carried:
        extra[CARRIED] = carry(json.dumps(data).encode())
    return c, dataclasses.replace(msg, extra=extra)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d, s: d["files"][0].update(d=s.full_url() + "/../escaped"),
            "outside the destination",
        ),
        (lambda d, s: d["files"][0].update(d="file:///etc/passwd"), "outside the destination"),
        (
            lambda d, s: d["files"][0].update(s=s.full_url() + "/elsewhere/file"),
            "not inside the task attempt",
        ),
        (lambda d, s: d["files"][0].update(d=s.full_url() + "/_temporary/x"), "not a data path"),
        (lambda d, s: d["files"][0].update(d=s.full_url() + "/_SUCCESS"), "not a data path"),
    ],
)
@pytest.mark.parametrize("carried", [False, True], ids=["saved", "carried"])
def test_path_traversal_refused_before_any_rename(store, mutate, message, carried):
    c, job = new_job(store)
    c, msg = _forge(store, job, mutate, carried)
    renames = store.stats.counter("op_rename")
    with pytest.raises(ValidationError, match=message) as e:
        c.commit_job(job, [msg])
    assert "-manifest.json" in str(e.value)  # names the manifest
    assert store.stats.counter("op_rename") == renames
    assert visible(store) == []


def test_two_tasks_writing_one_destination_named(store):
    c, job = new_job(store)
    msgs = run_tasks(c, job, {0: ["same"], 1: ["same"]})
    with pytest.raises(JobCommitError, match="written by two tasks") as e:
        c.commit_job(job, msgs)
    assert msgs[0].attempt_id in str(e.value) and msgs[1].attempt_id in str(e.value)


def test_summary_report_written_even_on_failure(tmp_path):
    reports = tmp_path / "reports"
    store = open_store(str(tmp_path / "out"))
    c, job = new_job(store, summary_report_dir=str(reports))
    msgs = run_tasks(c, job, {0: ["a"], 1: ["a"]})
    with pytest.raises(JobCommitError):
        c.commit_job(job, msgs)
    report = json.loads((reports / f"summary-{job.job_uuid}.json").read_text())
    assert (
        report["success"] is False and "written by two tasks" in report["diagnostics"]["exception"]
    )
    c.abort_job(job)  # does not overwrite the failure report
    assert (
        "exception"
        in json.loads((reports / f"summary-{job.job_uuid}.json").read_text())["diagnostics"]
    )


def test_diagnostics_directory_receives_manifests(store):
    c, job = new_job(store, diagnostics_manifest_dir="_diagnostics")
    c.commit_job(job, run_tasks(c, job, {0: ["a"], 1: ["b"]}))
    assert len(store.list(f"_diagnostics/{job.job_uuid}")) == 2


def test_delete_target_files(store):
    store.write_bytes("p/a", b"previous")
    c, job = new_job(store)
    with pytest.raises(JobCommitError, match="already there"):
        c.commit_job(job, run_tasks(c, job, {0: ["p/a"]}))
    c, job = new_job(store, delete_target_files=True)
    c.commit_job(job, run_tasks(c, job, {0: ["p/a"]}))
    assert store.read_bytes("p/a") == b"0:p/a"


def test_loading_2000_manifests_keeps_memory_bounded(tmp_path):
    """Memory while loading grows with threads, not with manifests: entries are spilled."""
    store = open_store(str(tmp_path / "out"))
    c, job = new_job(store, io_threads=4)
    layout = JobLayout.of(job)
    msgs = []
    from dataferry.commit.manifest.files import FileEntry
    from dataferry.commit.protocol import TaskCommitMessage

    for i in range(2000):
        t = job.task(i)
        ta = layout.task_attempt_dir(t)
        files = [
            FileEntry(
                f"{ta}/p={k}/part-{i}-{k}.parquet",
                f"p={k}/part-{i}-{k}.parquet",
                1000,
                f"etag-{i}-{k}",
            )
            for k in range(10)
        ]
        m = TaskManifest(job.job_uuid, 0, str(t.task_id), str(t.attempt_id), ta, files=files)
        store.write_bytes(layout.manifest_path(str(t.task_id)), m.to_bytes(store))
        msgs.append(
            TaskCommitMessage(str(job.job_id), str(t.task_id), str(t.attempt_id), "manifest")
        )
    manifest_bytes = sum(s.size for s in store.walk(layout.manifests_dir))
    from dataferry.commit.manifest.stages.load import load_manifests
    from dataferry.commit.protocol import StageContext
    from dataferry.store import IOPool
    from dataferry.store.scratch import scratch_store

    ctx = StageContext(store=store, stats=c.stats, pool=IOPool(4), config=c.config, layout=layout)
    with scratch_store() as scratch:  # once untraced: first-use caches are not the load's
        load_manifests(ctx, {m.task_id: m.attempt_id for m in msgs[:20]}, scratch)
    tracemalloc.start()
    with scratch_store() as scratch:
        loaded = load_manifests(ctx, {m.task_id: m.attempt_id for m in msgs}, scratch)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert loaded.manifests == 2000 and loaded.files == 20_000
        assert sum(1 for _ in loaded.entries()) == 20_000
    ctx.pool.close()
    # holding every parsed manifest would take several times their JSON size; the bound leaves
    # room for the entries' spill buffers, whose share depends on the paths' lengths
    assert peak < manifest_bytes / 2, (peak, manifest_bytes)


class _SlowListing(WrappingStore):
    """Listings and stats that wait like an object store's, counting how many overlap."""

    def __init__(self, inner):
        super().__init__(inner)
        self._lock = threading.Lock()
        self._in_flight = 0
        self.peak = 0

    def _waiting(self, call):
        with self._lock:
            self._in_flight += 1
            self.peak = max(self.peak, self._in_flight)
        try:
            time.sleep(0.01)
            return call()
        finally:
            with self._lock:
                self._in_flight -= 1

    def _list(self, path):
        return self._waiting(lambda: self.inner.list(path))

    def _stat(self, path):
        return self._waiting(lambda: self.inner.stat(path))


@pytest.mark.parametrize("threads", [1, 8])
def test_task_scan_lists_a_level_in_parallel_and_finds_the_same_entries(tmp_path, threads):
    base = open_store(str(tmp_path / "out"))
    base.write_bytes("day=1/region=a/old", b"old")  # a destination directory that exists
    base.write_bytes("day=2", b"a file where a directory must go")
    slow = _SlowListing(base)
    c, job = new_job(slow, task_scan_threads=threads)
    t = job.task(0)
    c.setup_task(t)
    for day in (1, 2, 3):  # in the tree, as a Hadoop task writes (not flat): three levels
        for region in "abcd":
            base.write_bytes(f"{c.task_work_path(t)}/day={day}/region={region}/part-0", b"x" * day)
    slow.peak = 0
    msg = c.commit_task(t)
    assert (slow.peak > 1) == (threads > 1)
    manifest = TaskManifest.from_bytes(base.read_bytes(msg.extra["manifest"]), base, "manifest")
    assert [f.dest for f in manifest.files] == [
        f"day={d}/region={r}/part-0" for d in (1, 2, 3) for r in "abcd"
    ]
    status = {d.dest: d.status for d in manifest.directories}
    assert len(status) == 15 and set(status.values()) == {EntryStatus.UNKNOWN}  # none asked
    c.commit_job(job, [msg])
    assert len(visible(base)) == 13  # the file where `day=2` goes made way
    assert base.stat("day=2").is_dir


def test_an_attempt_into_many_partitions_is_one_directory_and_its_job_commit_removes_few(
    tmp_path,
):
    """Each attempt names its files flat, so writing into 60 partitions makes one directory
    to list at task commit and one to remove at job commit, not 60 of each."""
    store = WrappingStore(open_store(str(tmp_path / "out")))
    c, job = new_job(store)
    names = {i: [f"day={p}/t{i}-{p}.parquet" for p in range(60)] for i in range(3)}
    tasks = [job.task(i) for i in names]
    for task in tasks:
        c.setup_task(task)
        for name in names[task.task_index]:
            c.write_file(task, name, b"x" * task.task_index)
        work = tmp_path / "out" / c.task_work_path(task)
        assert [p for p in work.iterdir() if p.is_dir()] == []
    before = store.stats.counter("op_list_status")
    msgs = [c.commit_task(task) for task in tasks]
    assert store.stats.counter("op_list_status") - before == len(tasks)  # one listing per attempt
    c.commit_job(job, msgs)
    expected = sorted(n for ns in names.values() for n in ns)
    assert visible(store) == expected
    assert not (tmp_path / "out" / "_temporary").exists()


def test_task_commit_records_its_file_sizes_in_hadoops_statistics(tmp_path):
    """The task commit adds its files' sizes to `committer_task_file_size` (mean, least, most)
    at once rather than file by file: were they lost, the manifest's and the job's statistics
    (Hadoop's names, read by its tools) would show no file sizes."""
    c = make_committer("manifest", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    for i, sizes in enumerate(((3, 5), (7,))):
        t = job.task(i)
        c.setup_task(t)
        for j, n in enumerate(sizes):
            c.write_file(t, f"p={j}/f-{i}", b"x" * n)
        c.commit_task(t)
    snap = c.stats.snapshot()
    name = "committer_task_file_size"
    assert snap["meanstatistics"][f"{name}.mean"] == {"samples": 3, "sum": 15.0}
    assert (snap["minimums"][f"{name}.min"], snap["maximums"][f"{name}.max"]) == (3, 7)


def test_an_append_creates_only_the_directories_its_plan_did_not_find(store):
    """The tasks record their directories unknown; the job commit's own walk of the
    destination (under the claim) tells which exist, and only the others are created: an
    append into existing partitions costs no create each (a request on a remote store)."""
    store.write_bytes("p=0/old", b"old")
    store.write_bytes("p=1/q=a/old", b"old")
    c, job = new_job(store)
    messages = run_tasks(c, job, {0: ["p=0/a", "p=1/q=a/b", "p=1/q=b/c"], 1: ["p=2/d"]})
    before = store.stats.snapshot()
    result = c.commit_job(job, messages)
    made = store.stats.diff(before)["counters"].get("op_mkdirs", 0)
    assert result.details["directories_created"] == 3  # p=1/q=b, p=2 (and p=1 its parent)
    assert made == 2, made
    new = ["p=0/a", "p=1/q=a/b", "p=1/q=b/c", "p=2/d"]
    assert sorted(visible(store)) == sorted([*new, "p=0/old", "p=1/q=a/old"])
