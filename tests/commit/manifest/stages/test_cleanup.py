"""Cleaning up alone: this job's directories go (attempts first, in parallel), `_temporary`
only when no other job's are in it; abort's cleanup is a stage of its own, the job commit's
runs inside the shared cleanup stage and is timed there once."""

from __future__ import annotations

import pytest

from dataferry.commit.job.stages import cleanup_stage
from dataferry.commit.manifest.stages.cleanup import CleanupOutcome, cleanup
from dataferry.errors import StoreError
from dataferry.store import FaultRule, Op, open_store

from .helpers import LAYOUT, assert_failed, assert_timed, write_attempt


def _job_dirs(store) -> None:
    for n in range(3):
        write_attempt(store, n, {f"p={n}/f": b"x"})


def test_abort_deletes_the_job_and_an_empty_temporary_directory(store, ctx):
    _job_dirs(store)
    store.write_bytes("kept", b"data")
    assert cleanup(ctx, "job_stage_abort") == CleanupOutcome.PARALLEL_DELETE
    assert [s.path for s in store.walk("")] == ["kept"]
    assert_timed(ctx, "job_stage_abort", "abort")


def test_another_jobs_directories_are_left_alone(store, make_ctx):
    _job_dirs(store)
    store.write_bytes("_temporary/other-job/00/tasks/t/f", b"still writing")
    ctx = make_ctx(cleanup_parallel_delete=False)
    assert cleanup(ctx, "job_stage_abort") == CleanupOutcome.DELETED
    assert not store.exists(LAYOUT.job_dir)
    assert store.read_bytes("_temporary/other-job/00/tasks/t/f") == b"still writing"
    assert_timed(ctx, "job_stage_abort", "abort")


def test_nothing_to_clean_up_and_cleanup_skipped(store, make_ctx):
    ctx = make_ctx()
    assert cleanup(ctx, "job_stage_abort") == CleanupOutcome.NOTHING_TO_CLEAN_UP
    assert_timed(ctx, "job_stage_abort", "abort")
    _job_dirs(store)
    skipped = make_ctx(cleanup_skipped=True)
    assert cleanup(skipped, "job_stage_abort") == CleanupOutcome.DISABLED
    assert store.exists(LAYOUT.job_dir)
    assert_timed(skipped, "job_stage_abort", "abort")


def test_a_failing_delete_fails_the_stage_unless_failures_are_ignored(tmp_path, make_ctx):
    rule = FaultRule(action="fail", kinds=frozenset({Op.DELETE}), times=0)
    store = open_store(str(tmp_path / "faulty"), faults=[rule])
    _job_dirs(store)
    rule.times = -1
    ctx = make_ctx(store)
    with pytest.raises(StoreError):
        cleanup(ctx, "job_stage_abort")
    assert_failed(ctx, "job_stage_abort", "abort")
    ignoring = make_ctx(store, cleanup_failures_ignored=True)
    assert cleanup(ignoring, "job_stage_abort") == CleanupOutcome.FAILURE
    assert store.exists(LAYOUT.job_dir)
    assert_timed(ignoring, "job_stage_abort", "abort")


class _Hooks:
    """The one hook the shared cleanup stage calls, as the manifest committer implements it."""

    def remove_job_dir(self, ctx, job) -> str:
        return str(cleanup(ctx))


def test_the_job_commits_cleanup_is_timed_once_by_the_shared_stage(store, ctx):
    _job_dirs(store)
    assert cleanup_stage(ctx, _Hooks(), None) == "parallel delete"
    assert not store.exists("_temporary")
    assert_timed(ctx, "job_stage_cleanup", "cleanup")
