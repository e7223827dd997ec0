"""Loading the committed tasks' manifests alone (hand-written manifests), and the check for
files already in the destination: totals, the entries file, refusals, statistics."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dataferry.commit.manifest.files import DirEntry, EntryStatus, FileEntry
from dataferry.commit.manifest.stages.load import check_existing_files, load_manifests
from dataferry.errors import JobCommitError, ValidationError

from .helpers import (
    assert_failed,
    assert_timed,
    attempt_dir,
    committed,
    save_manifest,
    write_attempt,
)


def test_manifests_load_into_totals_and_one_entries_file(store, scratch, ctx):
    one = write_attempt(store, 1, {"p=1/a": b"aa", "p=2/b": b"bbb"})
    two = write_attempt(store, 2, {"p=1/c": b"c"})
    empty = write_attempt(store, 3, {})
    before = sorted(s.path for s in store.walk(""))
    loaded = load_manifests(ctx, committed(one, two, empty), scratch)
    assert (loaded.manifests, loaded.files, loaded.bytes) == (3, 3, 6)
    assert loaded.task_attempts == {
        one.task_attempt_id: 2,
        two.task_attempt_id: 1,
        empty.task_attempt_id: 0,
    }
    assert sorted(loaded.directories) == ["p=1", "p=2"]
    assert sorted((e.dest, e.size, a) for e, a in loaded.entries()) == [
        ("p=1/a", 2, one.task_attempt_id),
        ("p=1/c", 1, two.task_attempt_id),
        ("p=2/b", 3, one.task_attempt_id),
    ]
    assert scratch.stat(loaded.entries_path).size == loaded.entries_bytes  # two lines
    assert sorted(s.path for s in store.walk("")) == before  # the destination is untouched
    assert ctx.stats.counter("committer_task_manifests_loaded") == 3
    assert ctx.stats.counter("op_load_manifest") == 3
    assert_timed(ctx, "job_stage_load_manifests", "load_manifests")


def test_a_committed_tasks_missing_manifest_fails_the_load(store, scratch, ctx):
    one = write_attempt(store, 1, {"a": b"a"}, save=False)
    with pytest.raises(JobCommitError, match=r"its manifest .* is missing"):
        load_manifests(ctx, committed(one), scratch)
    assert_failed(ctx, "job_stage_load_manifests", "load_manifests")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda m: replace(m, job_id="another-job"), "is of job 'another-job'"),
        (lambda m: replace(m, task_attempt_dir=attempt_dir(7)), "is not"),
        (
            lambda m: replace(m, files=[FileEntry(attempt_dir(7) + "/x", "x", 1)]),
            "is not inside the task attempt directory",
        ),
        (
            lambda m: replace(m, files=[FileEntry(m.task_attempt_dir + "/s", "_SUCCESS", 1)]),
            "is not a data path",
        ),
        (
            lambda m: replace(m, files=[FileEntry(m.task_attempt_dir + "/t", "_temporary/t", 1)]),
            "is not a data path",
        ),
        (
            lambda m: replace(m, directories=[DirEntry("_temporary", EntryStatus.NOT_FOUND, 1)]),
            "is not a data path",
        ),
    ],
)
def test_a_manifest_that_points_outside_its_place_is_refused(store, scratch, ctx, change, words):
    bad = change(write_attempt(store, 1, {"a": b"a"}))
    save_manifest(store, bad)
    with pytest.raises(ValidationError, match=words):
        load_manifests(ctx, {bad.task_id: bad.task_attempt_id}, scratch)
    assert_failed(ctx, "job_stage_load_manifests", "load_manifests")


def test_two_tasks_writing_one_destination_are_both_named(store, scratch, ctx):
    one = write_attempt(store, 1, {"p/a": b"1"})
    two = write_attempt(store, 2, {"p/a": b"2"})
    with pytest.raises(JobCommitError, match="is written by two tasks") as e:
        load_manifests(ctx, committed(one, two), scratch)
    assert one.task_attempt_id in str(e.value) and two.task_attempt_id in str(e.value)
    assert_failed(ctx, "job_stage_load_manifests", "load_manifests")


def test_a_manifest_saved_by_another_attempt_is_rebuilt_from_the_chosen_attempts_files(
    store, scratch, ctx
):
    chosen = write_attempt(store, 1, {"a": b"chosen", "b": b"b"}, attempt=0, save=False)
    write_attempt(store, 1, {"a": b"the other one"}, attempt=1)  # saved last: owns the name
    loaded = load_manifests(ctx, committed(chosen), scratch)
    assert [(e.source, e.size, a) for e, a in loaded.entries()] == [
        (f.source, f.size, chosen.task_attempt_id) for f in chosen.files
    ]
    assert ctx.stats.counter("committer_task_manifests_rebuilt") == 1
    assert_timed(ctx, "job_stage_load_manifests", "load_manifests")


def test_existing_files_are_found_before_anything_changes(store, scratch, make_ctx):
    store.write_bytes("p=1/a", b"an older file")
    store.write_bytes("p=1/other", b"kept")
    manifest = write_attempt(store, 1, {"p=1/a": b"new", "p=1/b": b"new", "top": b"t"})
    # the task saw p=1 existing: that directory is listed, and the destination's root
    manifest.directories = [DirEntry("p=1", EntryStatus.DIR, 1)]
    save_manifest(store, manifest)
    loaded = load_manifests(make_ctx(), committed(manifest), scratch)

    refusing = make_ctx()
    with pytest.raises(JobCommitError, match=r"p=1/a .*a file is already there"):
        check_existing_files(refusing, loaded)
    assert_failed(refusing, "job_stage_check_existing_files", "check_existing_files")

    replacing = make_ctx(delete_target_files=True)
    assert check_existing_files(replacing, loaded) == ["p=1/a"]
    assert store.read_bytes("p=1/a") == b"an older file"  # found, not deleted here
    assert replacing.stats.counter("op_delete_file_under_destination") == 1
    assert_timed(replacing, "job_stage_check_existing_files", "check_existing_files")


def test_the_destination_is_walked_where_it_exists_though_the_tasks_saw_nothing(
    store, scratch, make_ctx
):
    """The tasks record their directories unknown; the job commit walks the destination from
    its root and lists each of the job's directories that exists, once, and no other: a file
    in the way two levels down is found, a directory missing from its parent's listing is not
    asked about (nor anything below it)."""
    store.write_bytes("a/b/old", b"older")
    store.write_bytes("a/elsewhere/z", b"not the job's")
    manifest = write_attempt(store, 1, {"a/b/old": b"new", "a/b/c/d": b"1", "x/y/z": b"2"})
    manifest.directories = [
        DirEntry(d, EntryStatus.UNKNOWN, d.count("/") + 1)
        for d in ("a", "a/b", "a/b/c", "x", "x/y")
    ]
    save_manifest(store, manifest)
    loaded = load_manifests(make_ctx(), committed(manifest), scratch)
    ctx = make_ctx(delete_target_files=True)
    before = store.stats.snapshot()
    assert check_existing_files(ctx, loaded) == ["a/b/old"]
    asked = store.stats.diff(before)["counters"]
    assert asked["op_list_status"] == 3 and "op_list_status.failures" not in asked  # "", a, a/b


def test_a_new_destination_has_no_existing_files(store, scratch, make_ctx):
    manifest = write_attempt(store, 1, {"p=1/a": b"new"})
    loaded = load_manifests(make_ctx(), committed(manifest), scratch)
    ctx = make_ctx()
    assert check_existing_files(ctx, loaded) == []
    assert_timed(ctx, "job_stage_check_existing_files", "check_existing_files")


def test_names_that_only_contain_a_reserved_name_load(store, scratch, ctx):
    """`_SUCCESS` and `_temporary` are refused as the destination's own entries only: a file
    or directory that merely holds one of the names in its path is data."""
    names = ["p/_SUCCESS", "_SUCCESS.crc", "_temporary_x", "p/_temporary/a", "x_temporary"]
    manifest = write_attempt(store, 1, {name: b"d" for name in names})
    loaded = load_manifests(ctx, committed(manifest), scratch)
    assert sorted(e.dest for e, _ in loaded.entries()) == sorted(names)
