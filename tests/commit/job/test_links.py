"""Links are not followed: a symbolic link in task output is refused, never committed through."""

from __future__ import annotations

import os

import pytest

from dataferry import make_committer
from dataferry.commit.hive.staging import ext_dir
from dataferry.errors import CommitError, JobCommitError, TaskCommitError
from dataferry.store import open_store

from ..helpers import visible


@pytest.fixture
def outside(tmp_path):
    """A directory outside the destination, with two files in it."""
    d = tmp_path / "outside"
    (d / "sub").mkdir(parents=True)
    (d / "a.parquet").write_bytes(b"outside a")
    (d / "sub" / "b.parquet").write_bytes(b"outside b")
    return d


def outside_files(d) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def task_with_link(committer, dest, target, link_name="part=x"):
    """A set-up task whose work directory holds a real file and a link to `target`."""
    job = committer.new_job()
    committer.setup_job(job)
    task = job.task(0)
    committer.setup_task(task)
    committer.write_file(task, "part=a/real.parquet", b"real")
    link = dest / committer.task_work_path(task) / link_name
    link.parent.mkdir(parents=True, exist_ok=True)  # the real file may be named flat
    os.symlink(target, link)
    return task


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


def test_hive_load_refuses_a_link_in_the_staged_tree(tmp_path, outside):
    dest = tmp_path / "t"
    c = make_committer("hive", str(dest), mode="append")
    job = c.new_job()
    c.setup_job(job)
    task = job.task(0)
    c.setup_task(task)
    c.write_file(task, "day=a/part-0.parquet", b"real")
    msg = c.commit_task(task)
    before = outside_files(outside)
    os.symlink(outside, dest / ext_dir(job) / "day=x")  # planted in the staged tree
    with pytest.raises(CommitError, match="links are not followed") as e:
        c.commit_job(job, [msg])
    assert c.store.full_url(f"{ext_dir(job)}/day=x") in str(e.value)
    assert outside_files(outside) == before
    assert visible(dest) == []


def test_v1_job_commit_refuses_a_link_its_task_commit_did_not_list(tmp_path, outside):
    """v1's task commit renames the attempt directory and lists nothing; the job commit's one
    walk of the committed tasks refuses the link before anything is published (inside a
    directory that would move whole, where no listing of the merge sees it)."""
    dest = tmp_path / "dest"
    c = make_committer("v1", str(dest))
    before = outside_files(outside)
    task = task_with_link(c, dest, outside, "part=a/x")
    counters = c.store.stats.snapshot()
    msg = c.commit_task(task)
    ops = c.store.stats.diff(counters)["counters"]
    assert not ops.get("op_list_files") and not ops.get("op_list_status")  # no walk per task
    with pytest.raises(JobCommitError, match="links are not followed") as e:
        c.commit_job(task.job, [msg])
    assert "part=a/x" in str(e.value)
    assert outside_files(outside) == before
    assert visible(dest) == []
