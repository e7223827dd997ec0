"""Creating the destination directories alone: only leaves, none the tasks saw existing, a
file standing where a directory goes deleted first."""

from __future__ import annotations

import threading

import pytest

from dataferry.commit.manifest.files import DirEntry, EntryStatus
from dataferry.commit.manifest.stages.create_dirs import create_directories, leaf_directories
from dataferry.store import open_store

from .helpers import assert_timed


def _dirs(*entries: tuple[str, EntryStatus]) -> dict[str, DirEntry]:
    return {d: DirEntry(d, s, d.count("/") + 1) for d, s in entries}


DIRS = _dirs(
    ("a", EntryStatus.NOT_FOUND),
    ("a/b", EntryStatus.NOT_FOUND),
    ("c", EntryStatus.DIR),  # seen existing at task commit
    ("d", EntryStatus.FILE),  # a file stands where this directory goes
)


def test_leaves_are_the_directories_nothing_lies_below():
    assert [d.dest for d in leaf_directories(DIRS)] == ["c", "d", "a/b"]


def test_leaves_are_created_and_files_in_the_way_deleted(store, ctx):
    store.mkdirs("c")
    store.write_bytes("d", b"in the way")
    result = create_directories(ctx, DIRS)
    assert result.created == {"a", "a/b", "d"}  # a came with a/b
    assert (result.found, result.files_deleted) == (1, 1)
    assert all(store.stat(p).is_dir for p in ("a/b", "c", "d"))
    assert ctx.stats.counter("op_prepare_dir_ancestors") == 1
    assert ctx.stats.counter("op_create_one_directory") == 2  # not c: no I/O for it
    assert_timed(ctx, "job_stage_create_target_dirs", "create_directories")


def test_forced_creation_repeats_directories_the_tasks_saw(store, ctx):
    result = create_directories(ctx, DIRS, force=True)  # c was taken away since
    assert result.created == {"a", "a/b", "c", "d"} and result.found == 0
    assert store.stat("c").is_dir
    assert ctx.stats.counter("op_create_one_directory") == 3
    assert_timed(ctx, "job_stage_create_target_dirs", "create_directories")


@pytest.mark.parametrize(
    "where",
    [
        "memory",
        "local",
    ],
)
def test_a_file_that_appeared_since_task_commit_makes_way(tmp_path, make_ctx, where):
    url = f"memory://stages/{tmp_path.name}" if where == "memory" else str(tmp_path / "local")
    store = open_store(url)
    ctx = make_ctx(store)
    store.write_bytes("x", b"appeared after the task looked")
    result = create_directories(ctx, _dirs(("x/y", EntryStatus.NOT_FOUND)))
    assert result.created == {"x", "x/y"} and store.stat("x/y").is_dir
    assert ctx.stats.counter("op_delete_file_under_destination") == 1
    assert_timed(ctx, "job_stage_create_target_dirs", "create_directories")


def test_directories_a_local_disk_makes_at_once_are_made_on_the_committing_thread(
    store, make_ctx, monkeypatch
):
    """A local disk makes a directory in microseconds, of the committing thread's own CPU:
    the stage makes them in line (the pool's adaptive mode), not on I/O threads started for
    40 directories of a partitioned write, which cost more than the directories (a third
    of a write's job commit). Broken, the directories are made on the pool's threads."""
    ctx = make_ctx(threads=8)
    made: list[str] = []
    real = type(store).mkdirs

    def spy(self, path, *args, **kwargs):
        made.append(threading.current_thread().name)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(type(store), "mkdirs", spy)
    dirs = _dirs(
        *((f"day={d}/region={r}", EntryStatus.NOT_FOUND) for d in range(8) for r in range(5))
    )
    result = create_directories(ctx, dirs)
    assert len(result.created) == 48 and len(made) == 40
    assert set(made) == {threading.current_thread().name}, set(made)
