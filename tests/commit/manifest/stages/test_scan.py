"""The task scan alone: one walk of the attempt directory gives each file's entry (size and
etag from the listing) and each directory the files need, asking the destination nothing and
changing nothing."""

from __future__ import annotations

import os

import pytest

from dataferry.commit.manifest.files import EntryStatus
from dataferry.commit.manifest.stages.scan import scan_task_attempt
from dataferry.commit.protocol.inflight import (
    flat_inflight_name,
    inflight_name,
    published_name,
    unflatten,
)
from dataferry.errors import TaskCommitError

from .helpers import assert_failed, assert_timed, attempt_dir


def test_scan_lists_files_and_asks_nothing_of_the_destination(store, ctx):
    """Every directory the files need is in the manifest, of status unknown, with no request
    to the destination: the job commit walks it once (`check_existing_files`). Were the tasks
    to probe it again, 40 tasks into 40 partitions would ask 1,600 times."""
    store.write_bytes("day=1/old", b"old")  # an existing destination directory
    store.write_bytes("day=2", b"a file where a directory goes")
    base = attempt_dir(0)
    for path, data in {"day=1/a": b"1", "day=2/b": b"22", "day=3/x/c": b"333", "top": b""}.items():
        store.write_bytes(f"{base}/{path}", data)
    before = sorted((s.path, s.size) for s in store.walk(""))
    stats_before = store.stats.snapshot()
    files, dirs = scan_task_attempt(ctx, base)
    asked = store.stats.diff(stats_before)["counters"]
    assert [(f.source, f.dest, f.size) for f in files] == [
        (f"{base}/day=1/a", "day=1/a", 1),
        (f"{base}/day=2/b", "day=2/b", 2),
        (f"{base}/day=3/x/c", "day=3/x/c", 3),
        (f"{base}/top", "top", 0),
    ]
    assert all(f.etag == store.stat(f.source).etag for f in files)
    assert [(d.dest, d.status, d.level) for d in dirs] == [
        ("day=1", EntryStatus.UNKNOWN, 1),
        ("day=2", EntryStatus.UNKNOWN, 1),
        ("day=3", EntryStatus.UNKNOWN, 1),
        ("day=3/x", EntryStatus.UNKNOWN, 2),
    ]
    assert not [k for k in asked if k.startswith("op_get_file_status")], asked
    assert asked["op_list_status"] == 5  # the attempt's own directories, nothing else
    assert sorted((s.path, s.size) for s in store.walk("")) == before  # nothing changed
    assert ctx.stats.counter("committer_task_file_count") == 4
    assert ctx.stats.counter("committer_task_directory_count") == 4
    assert_timed(ctx, "task_stage_scan_directory", "scan_directory")


def test_scan_of_a_missing_attempt_directory_says_so(ctx):
    with pytest.raises(TaskCommitError, match="does not exist: the attempt was never set up"):
        scan_task_attempt(ctx, attempt_dir(9))
    assert_failed(ctx, "task_stage_scan_directory", "scan_directory")


def test_scan_refuses_a_link_in_the_attempt_directory(tmp_path, store, ctx):
    base = attempt_dir(0)
    store.write_bytes(f"{base}/real", b"x")
    os.symlink(tmp_path / "elsewhere", tmp_path / "out" / base / "link")
    with pytest.raises(TaskCommitError, match="is a symbolic link"):
        scan_task_attempt(ctx, base)
    assert_failed(ctx, "task_stage_scan_directory", "scan_directory")


def test_flat_names_go_back_to_their_place_in_the_tree_beside_a_walked_one(store, ctx):
    store.write_bytes("day=1/old", b"old")
    base = attempt_dir(0)
    for rel, data in {"day=1/a": b"1", "day=3/x/c%2Fd": b"22", "top": b"333"}.items():
        store.write_bytes(f"{base}/{flat_inflight_name(rel)}", data)
    store.write_bytes(f"{base}/day=2/b.inflight", b"4444")  # written in the tree
    files, dirs = scan_task_attempt(ctx, base)
    assert [(f.dest, f.size) for f in files] == [
        ("day=1/a", 1),
        ("day=2/b", 4),
        ("day=3/x/c%2Fd", 2),  # an escape of the name's own stays as it was
        ("top", 3),
    ]
    assert [(d.dest, d.status, d.level) for d in dirs] == [
        ("day=1", EntryStatus.UNKNOWN, 1),
        ("day=2", EntryStatus.UNKNOWN, 1),
        ("day=3", EntryStatus.UNKNOWN, 1),
        ("day=3/x", EntryStatus.UNKNOWN, 2),
    ]
    kept, _ = scan_task_attempt(ctx, base, publish_names=False)  # for a committer above
    assert [f.dest for f in kept] == [
        "day=1/a.inflight",
        "day=2/b.inflight",
        "day=3/x/c%2Fd.inflight",
        "top.inflight",
    ]


@pytest.mark.parametrize(
    "relpath", ["a", "day=1/part-0.parquet", "c=%2F/%25/x%", "city=S%C3%A3o/ü/p", "a/b/c/d/e"]
)
def test_a_flat_name_is_one_name_that_gives_its_path_back(relpath):
    flat = flat_inflight_name(relpath)
    assert "/" not in flat and flat.endswith(".inflight")
    assert unflatten(flat) == inflight_name(relpath)
    assert published_name(flat) == relpath == published_name(inflight_name(relpath))
    assert unflatten(f"x/{inflight_name(relpath)}") == f"x/{inflight_name(relpath)}"


def test_a_path_too_long_for_one_name_keeps_its_place_in_the_tree(store):
    from dataferry import make_committer

    c = make_committer("manifest", store)
    job = c.new_job()
    c.setup_job(job)
    task = job.task(0)
    c.setup_task(task)
    deep = "/".join(f"level{i}={'v' * 40}" for i in range(6)) + "/part-0.parquet"
    assert flat_inflight_name(deep) is None
    short = c.write_file(task, "day=1/part-0.parquet", b"1")
    long = c.write_file(task, deep, b"22")
    work = c.task_work_path(task)
    assert short == f"{work}/{flat_inflight_name('day=1/part-0.parquet')}"
    assert long == f"{work}/{inflight_name(deep)}"
    assert sorted(c.commit_task(task).files) == sorted(["day=1/part-0.parquet", deep])
