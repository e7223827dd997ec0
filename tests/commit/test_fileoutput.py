from __future__ import annotations

from functools import partial

import pytest

from dataferry import make_committer
from dataferry.commit import prepare_destination
from dataferry.errors import (
    ConfigError,
    DestinationError,
    JobCommitError,
    TaskCommitError,
)
from dataferry.store import FaultRule, Op, fault_layer, open_store, paths

from . import helpers


def run_tasks(committer, job, n=3, attempt=0):
    """`n` tasks, task i writing `p={i % 2}/part-{i}.txt` (`task i`), through the shared helper."""
    files = {i: [f"p={i % 2}/part-{i}.txt"] for i in range(n)}
    return helpers.run_tasks(committer, job, files, attempt, data=lambda i, _: f"task {i}".encode())


visible = partial(helpers.visible, show=("_SUCCESS",))
PROBES = ("op_get_file_status", "op_list_status")


@pytest.mark.parametrize("name", ["v1", "v2"])
def test_layout_and_job_commit(tmp_path, name):
    c = make_committer(name, str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    assert c.task_work_path(t) == f"_temporary/0/_temporary/{t.attempt_id}"
    msgs = run_tasks(c, job)
    if name == "v2":  # v2 merged them; v1 renamed its directory and listed nothing
        assert msgs[0].files == ("p=0/part-0.txt",) and msgs[0].bytes == 6
    else:
        assert msgs[0].files == () and msgs[0].bytes == 0
    result = c.commit_job(job, msgs)
    assert result.files == 3
    assert visible(c.store) == ["_SUCCESS", "p=0/part-0.txt", "p=0/part-2.txt", "p=1/part-1.txt"]
    assert c.store.read_bytes("_SUCCESS") == b""  # the classic empty marker
    assert not c.store.exists("_temporary")


def test_v1_nothing_visible_after_task_commit_v2_everything(tmp_path):
    for name, expect_visible in (("v1", False), ("v2", True)):
        c = make_committer(name, str(tmp_path / name))
        job = c.new_job()
        c.setup_job(job)
        run_tasks(c, job)
        assert bool(visible(c.store)) == expect_visible


def test_v1_a_later_attempt_replaces_a_dead_attempts_committed_output(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    dead = job.task(0, 0)
    c.setup_task(dead)
    c.write_file(dead, "a/dead.txt", b"dead")
    c.commit_task(dead)  # committed, but the driver never heard: it reruns the task
    live = job.task(0, 1)
    c.setup_task(live)
    c.write_file(live, "a/live.txt", b"live")
    msg = c.commit_task(live)
    c.commit_job(job, [msg])
    assert visible(c.store) == ["_SUCCESS", "a/live.txt"]


def test_v1_merges_into_existing_partitions(tmp_path):
    store = open_store(str(tmp_path / "out"))
    store.write_bytes("p=0/old.txt", b"old")
    c = make_committer("v1", store)
    job = c.new_job()
    c.setup_job(job)
    c.commit_job(job, run_tasks(c, job))
    assert "p=0/old.txt" in visible(store) and "p=0/part-0.txt" in visible(store)


def test_abort_task_and_abort_job_remove_everything(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "x", b"1")
    c.abort_task(t)
    assert not c.store.exists(c.task_work_path(t))
    run_tasks(c, job)
    c.abort_job(job)
    c.abort_job(job)  # idempotent
    assert c.store.walk("") == []


def test_abort_job_removes_a_hidden_success_copy_its_driver_left(tmp_path):
    """A driver that died between writing its hidden copy of `_SUCCESS` and renaming it left
    `_SUCCESS.<random>.tmp` (a name of its own) in the job's directory: rolling the job back
    removes it, and the directory with it."""
    c = make_committer("v1", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    run_tasks(c, job)
    copy = f"{c.job_attempt_path(job)}/_SUCCESS.0123456789abcdef0123456789abcdef.tmp"
    c.store.write_bytes(copy, b"{}")
    c.abort_job(job)
    assert c.store.walk("") == []


def test_task_committed_twice_is_a_clear_error(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.commit_task(t)
    with pytest.raises(TaskCommitError, match=str(t.attempt_id)):
        c.commit_task(t)


def test_job_with_foreign_or_duplicate_messages(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    other = c.new_job()
    c.setup_job(other)
    msgs = run_tasks(c, other, n=1)
    with pytest.raises(JobCommitError, match="belongs to job"):
        c.commit_job(job, msgs)
    with pytest.raises(JobCommitError, match="committed twice"):
        c.commit_job(other, msgs + msgs)


def test_destination_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("I am a file")
    c = make_committer("v1", str(tmp_path / "f"))
    with pytest.raises(DestinationError, match="is a file"):
        c.setup_job(c.new_job())
    with pytest.raises(DestinationError, match="is a file"):
        prepare_destination(c.store, "append")
    assert (tmp_path / "f").read_text() == "I am a file"


def test_unwritable_destination_is_named(tmp_path):
    store = open_store(
        str(tmp_path / "ro"),
        faults=[FaultRule(action="deny", times=-1, predicate=lambda i, op, p: op.mutates)],
    )
    c = make_committer("v1", store)
    with pytest.raises(DestinationError, match="not writable"):
        c.setup_job(c.new_job())


def test_unknown_committer_and_option():
    with pytest.raises(ConfigError, match=r"unknown committer 'v3'.*v1"):
        make_committer("v3", "memory://x/y")
    with pytest.raises(ConfigError, match="unknown option 'colour' for committer 'v1'"):
        make_committer("v1", "memory://x/y", colour="blue")
    with pytest.raises(ConfigError, match="algorithm must be 1 or 2"):
        make_committer("v1", "memory://x/y", algorithm=3)


def test_failed_merge_leaves_a_job_that_abort_recovers(tmp_path):
    store = open_store(
        str(tmp_path / "out"),
        faults=[
            FaultRule(action="fail", kinds=frozenset({Op.RENAME}), path_glob="_temporary/0/task_*")
        ],
    )
    c = make_committer("v1", store)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job)
    with pytest.raises(Exception, match="injected fail"):
        c.commit_job(job, msgs)
    assert not store.exists("_SUCCESS")
    c.abort_job(job)
    assert not store.exists("_temporary")


def test_statistics_of_stages(tmp_path):
    c = make_committer("v1", str(tmp_path / "out"))
    job = c.new_job()
    c.setup_job(job)
    result = c.commit_job(job, run_tasks(c, job))
    names = {r.name for r in result.iostatistics.durations()}
    assert {"job_stage_setup", "task_stage_commit", "committer_commit_job"} <= names
    assert set(result.stage_seconds) == {
        "claim",
        "take_committed_tasks",
        "list_committed_tasks",
        "plan_merge",
        "check_write_mode",
        "save_intent",
        "replace_existing",
        "merge_paths",
        "save_success",
        "cleanup",
        "total",
    }


def _published_rename_ambiguous_after(store):
    """The first rename into the visible tree takes effect, and its caller hears 'timed out'."""
    fault = fault_layer(store)
    rule = FaultRule(
        action="ambiguous",
        when="after",
        predicate=lambda i, op, p: op == Op.RENAME and not paths.is_hidden(fault.trace[i].dest),
    )
    fault.add_rule(rule)
    return rule


def test_v1_merge_resolves_an_ambiguous_rename_that_took_effect(tmp_path):
    """Before the one resilient move, v1's merge failed the job commit on an unknown outcome."""
    store = open_store(str(tmp_path / "out"), faults=[])
    c = make_committer("v1", store)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job)
    store.mkdirs("p=0")  # (the first rename into it is then the one that takes effect)
    rule = _published_rename_ambiguous_after(store)
    c.commit_job(job, msgs)
    assert rule.fired == 1
    assert visible(store) == ["_SUCCESS", "p=0/part-0.txt", "p=0/part-2.txt", "p=1/part-1.txt"]
    assert c.stats.counter("commit_file_rename_ambiguous") == 1


def test_v1_job_commit_refuses_a_link_its_task_commit_did_not_list(tmp_path):
    """v1's task commit renames the attempt directory and lists nothing; the job commit's one
    walk of the committed tasks refuses the link before anything is published (inside a
    directory that would move whole, where no listing of the merge sees it). Without that
    walk, the link's target directory would be renamed into the destination: files the job
    never wrote published, and taken away from where their owner keeps them."""
    outside = helpers.make_outside(tmp_path)
    dest = tmp_path / "dest"
    c = make_committer("v1", str(dest))
    before = helpers.outside_files(outside)
    task = helpers.task_with_link(c, dest, outside, "part=a/x")
    counters = c.store.stats.snapshot()
    msg = c.commit_task(task)
    ops = c.store.stats.diff(counters)["counters"]
    assert not ops.get("op_list_files") and not ops.get("op_list_status")  # no walk per task
    with pytest.raises(JobCommitError, match="links are not followed") as e:
        c.commit_job(task.job, [msg])
    assert "part=a/x" in str(e.value)
    assert helpers.outside_files(outside) == before
    assert helpers.visible(dest) == []


def test_v1_merge_plan_asks_the_destination_per_directory_not_per_file(tmp_path):
    """Planning v1's merge stats or lists each destination directory once, not each file
    (Hadoop's mergePaths stats every file): were it per file, a job commit of 20,000 files
    would send 20,000 more requests before its first rename. An existing file in the way is
    still found and replaced, and two tasks' files land side by side in a partition one of
    them moved whole."""
    store = open_store(str(tmp_path / "out"))
    store.write_bytes("p=0/part-0-0.txt", b"old")  # in the way of task 0's first file
    c = make_committer("v1", store)
    job = c.new_job()
    c.setup_job(job)
    files = {i: [f"p={p}/part-{i}-{j}.txt" for p in range(2) for j in range(10)] for i in range(4)}
    msgs = helpers.run_tasks(c, job, files, 0, data=lambda i, _: f"task {i}".encode())
    before = store.stats.snapshot()["counters"]
    result = c.commit_job(job, msgs)
    after = store.stats.snapshot()["counters"]
    asked = sum(  # answered or not found
        n - before.get(k, 0) for k, n in after.items() if k.startswith(PROBES)
    )
    assert result.files == 80
    assert asked < 40, asked  # 80 files: one probe each would be 80 at least
    assert store.read_bytes("p=0/part-0-0.txt") == b"task 0"
    assert len([v for v in visible(store) if v.startswith("p=1/")]) == 40


def test_v1_job_commit_removes_the_taken_task_directories_side_by_side(tmp_path):
    """After v1's merge each taken task directory holds an emptied directory per partition it
    wrote; the job commit's cleanup deletes those trees on its I/O pool, not one after another
    on the committing thread (on a local disk a third of the time, 40 tasks into 40
    partitions). Everything of the job is gone all the same."""
    import threading

    from dataferry.store import WrappingStore

    class Noting(WrappingStore):
        def __init__(self, inner):
            super().__init__(inner)
            self.deletes: list[tuple[str, str]] = []

        def _delete(self, path, recursive):
            self.deletes.append((path, threading.current_thread().name))
            return super()._delete(path, recursive)

    store = Noting(open_store(str(tmp_path / "out")))
    c = make_committer("v1", store)
    job = c.new_job()
    c.setup_job(job)
    c.commit_job(job, run_tasks(c, job, n=6))
    taken = [(p, t) for p, t in store.deletes if "/_committing/task_" in p]
    assert len(taken) == 6, store.deletes
    assert all(t.startswith("dataferry-io") for _, t in taken), taken
    assert visible(store) == ["_SUCCESS"] + [f"p={i % 2}/part-{i}.txt" for i in (0, 2, 4, 1, 3, 5)]
