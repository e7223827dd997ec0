"""Links are not followed: a symbolic link in task output is refused, never committed through."""

from __future__ import annotations

import os

import pytest

from dataferry import make_committer
from dataferry.errors import DestinationError, TaskCommitError
from dataferry.store import open_store

from ..helpers import make_outside, outside_files, run_tasks, task_with_link, visible


@pytest.fixture
def outside(tmp_path):
    return make_outside(tmp_path)


def test_manifest_task_commit_refuses_a_link_to_an_outside_directory(tmp_path, outside):
    dest = tmp_path / "dest"
    c = make_committer("manifest", str(dest))
    before = outside_files(outside)
    task = task_with_link(c, dest, outside)
    link_url = c.store.full_url(f"{c.task_work_path(task)}/part=x")
    with pytest.raises(TaskCommitError, match="links are not followed") as e:
        c.commit_task(task)
    assert link_url in str(e.value)
    assert outside_files(outside) == before  # nothing moved out of the linked directory
    assert visible(dest) == []


def test_manifest_task_commit_refuses_a_link_to_a_file(tmp_path, outside):
    dest = tmp_path / "dest"
    c = make_committer("manifest", str(dest))
    task = task_with_link(c, dest, outside / "a.parquet", "part=a/linked.parquet")
    with pytest.raises(TaskCommitError, match="links are not followed") as e:
        c.commit_task(task)
    assert c.store.full_url(f"{c.task_work_path(task)}/part=a/linked.parquet") in str(e.value)
    assert (outside / "a.parquet").read_bytes() == b"outside a"
    assert visible(dest) == []


def test_local_store_lists_links_as_themselves(tmp_path, outside):
    root = tmp_path / "store"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_bytes(b"12345")
    os.symlink(outside, root / "d" / "to_dir")
    os.symlink(outside / "a.parquet", root / "d" / "to_file")
    os.symlink(tmp_path / "missing", root / "d" / "dangling")
    store = open_store(str(root))
    links = {"d/dangling", "d/to_dir", "d/to_file"}
    for listing in (store.list("d"), store.walk("")):
        by_path = {s.path: s for s in listing}
        assert set(by_path) == links | {"d/f"}  # nothing from inside the linked directory
        assert {p for p, s in by_path.items() if s.is_link} == links
        assert not any(s.is_dir for s in listing)
        assert by_path["d/to_dir"].size == len(os.fsencode(outside))  # the link's own size
        assert by_path["d/f"].size == 5
    assert store.stat("d/to_dir").is_link  # stat never follows (a linked root is resolved once)


def test_hive_task_commit_refuses_a_link(tmp_path, outside):
    dest = tmp_path / "t"
    c = make_committer("hive", str(dest), mode="append")
    before = outside_files(outside)
    task = task_with_link(c, dest, outside, "day=x")
    with pytest.raises(TaskCommitError, match="links are not followed") as e:
        c.commit_task(task)
    assert c.store.full_url(f"{c.task_work_path(task)}/day=x") in str(e.value)
    assert outside_files(outside) == before
    assert visible(dest) == []


def test_an_overwrite_into_a_linked_partition_is_refused_before_it_replaces_anything(tmp_path):
    """A symbolic link among the destination's entries is refused when the write mode is
    checked, before the commit is decided. Without that check, an overwrite deletes the earlier
    data set and only then finds it cannot publish through the link: the user is left with
    neither the old data nor the new."""
    outside = make_outside(tmp_path)
    before = outside_files(outside)
    dest = tmp_path / "d"
    old = make_committer("manifest", str(dest))
    old_job = old.new_job()
    old.setup_job(old_job)
    old.commit_job(old_job, run_tasks(old, old_job, {0: ["p=0/old"]}))
    os.symlink(outside, dest / "p=9")
    c = make_committer("manifest", str(dest), mode="overwrite")
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: ["p=9/new", "p=1/new"]})
    with pytest.raises(DestinationError, match="symbolic link"):
        c.commit_job(job, msgs)
    assert visible(dest) == ["p=0", "p=0/old", "p=9"]  # the earlier set, whole
    assert outside_files(outside) == before
