"""The task scan alone: one walk of the attempt directory gives each file's entry (size and
etag from the listing) and each directory's state in the destination, changing nothing."""

from __future__ import annotations

import os

import pytest

from dataferry.commit.manifest.files import EntryStatus
from dataferry.commit.manifest.stages.scan import scan_task_attempt
from dataferry.errors import TaskCommitError

from .helpers import assert_failed, assert_timed, attempt_dir


def test_scan_lists_files_and_probes_only_where_the_parent_exists(store, ctx):
    store.write_bytes("day=1/old", b"old")  # an existing destination directory
    store.write_bytes("day=2", b"a file where a directory goes")
    base = attempt_dir(0)
    for path, data in {"day=1/a": b"1", "day=2/b": b"22", "day=3/x/c": b"333", "top": b""}.items():
        store.write_bytes(f"{base}/{path}", data)
    before = sorted((s.path, s.size) for s in store.walk(""))
    files, dirs = scan_task_attempt(ctx, base)
    assert [(f.source, f.dest, f.size) for f in files] == [
        (f"{base}/day=1/a", "day=1/a", 1),
        (f"{base}/day=2/b", "day=2/b", 2),
        (f"{base}/day=3/x/c", "day=3/x/c", 3),
        (f"{base}/top", "top", 0),
    ]
    assert all(f.etag == store.stat(f.source).etag for f in files)
    assert [(d.dest, d.status, d.level) for d in dirs] == [
        ("day=1", EntryStatus.DIR, 1),
        ("day=2", EntryStatus.FILE, 1),
        ("day=3", EntryStatus.NOT_FOUND, 1),
        ("day=3/x", EntryStatus.NOT_FOUND, 2),  # its parent is new: known without a probe
    ]
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
