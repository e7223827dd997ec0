"""Renaming the job's files alone, through the stage function only: every file moved, the
attempt directories emptied, unknown outcomes resolved, a resumed commit skipping what moved."""

from __future__ import annotations

import pytest

from dataferry.commit.manifest.stages.create_dirs import create_directories
from dataferry.commit.manifest.stages.load import load_manifests
from dataferry.commit.manifest.stages.rename import rename_files
from dataferry.errors import JobCommitError
from dataferry.store import FaultRule, Op, open_store

from .helpers import assert_failed, assert_timed, attempt_dir, committed, data_files, write_attempt

FILES = {1: {"p=1/a": b"a1", "p=2/b": b"bb"}, 2: {"p=1/c": b"ccc", "top": b"t"}}


def _ready(store, scratch, make_ctx):
    """The two earlier stages' results, made on contexts of their own."""
    manifests = [write_attempt(store, n, files) for n, files in FILES.items()]
    loaded = load_manifests(make_ctx(store), committed(*manifests), scratch)
    return loaded, create_directories(make_ctx(store), loaded.directories)


def test_every_file_moves_and_the_attempt_directories_go(store, scratch, make_ctx):
    loaded, created = _ready(store, scratch, make_ctx)
    ctx = make_ctx()
    result = rename_files(ctx, loaded, created)
    assert (result.files, result.bytes, result.recovered) == (4, 8, 0)
    assert sorted(result.filenames) == sorted(
        store.full_url(p) for files in FILES.values() for p in files
    )
    assert data_files(store) == ["p=1/a", "p=1/c", "p=2/b", "top"]
    assert store.read_bytes("p=1/c") == b"ccc"
    # each attempt's directory is deleted once its files moved, or (a delete the sweeper had
    # not begun when the renames ended) left empty to the cleanup stage
    assert all(store.walk(attempt_dir(n)) == [] for n in (1, 2))
    assert ctx.stats.counter("commit_file_rename") == 4
    assert ctx.stats.counter("commit_file_rename_recovered") == 0
    assert_timed(ctx, "job_stage_rename_files", "rename_files")


def test_a_resumed_rename_skips_the_files_moved_before_the_crash(store, scratch, make_ctx):
    loaded, created = _ready(store, scratch, make_ctx)
    store.rename(f"{attempt_dir(1)}/p=1/a", "p=1/a")  # moved by the run that died
    ctx = make_ctx()
    result = rename_files(ctx, loaded, created, resumed=True)
    assert (result.files, result.recovered) == (4, 1)
    assert data_files(store) == ["p=1/a", "p=1/c", "p=2/b", "top"]
    assert ctx.stats.counter("commit_file_rename_recovered") == 1
    assert_timed(ctx, "job_stage_rename_files", "rename_files")


def test_a_rename_with_an_unknown_outcome_that_took_effect_counts_as_done(
    tmp_path, scratch, make_ctx
):
    rule = FaultRule(action="ambiguous", when="after", kinds=frozenset({Op.RENAME}), times=0)
    store = open_store(str(tmp_path / "faulty"), faults=[rule])
    loaded, created = _ready(store, scratch, make_ctx)
    rule.times = 1  # the first rename of the stage times out, having moved its file
    ctx = make_ctx(store)
    result = rename_files(ctx, loaded, created)
    assert (result.files, result.recovered) == (4, 1)
    assert data_files(store) == ["p=1/a", "p=1/c", "p=2/b", "top"]
    assert ctx.stats.counter("commit_file_rename_ambiguous") == 1
    assert ctx.stats.counter("commit_file_rename_recovered") == 1
    assert_timed(ctx, "job_stage_rename_files", "rename_files")


def test_a_vanished_source_fails_the_stage_naming_it(store, scratch, make_ctx):
    loaded, created = _ready(store, scratch, make_ctx)
    store.delete(f"{attempt_dir(2)}/top")
    ctx = make_ctx()
    with pytest.raises(JobCommitError) as e:
        rename_files(ctx, loaded, created)
    assert store.full_url("top") in str(e.value)
    assert not store.exists("top")
    assert_failed(ctx, "job_stage_rename_files", "rename_files")
