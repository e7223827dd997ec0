"""Saving a task's manifest alone: written beside its final name and renamed over it, the
last attempt to commit winning, retried on ordinary store errors."""

from __future__ import annotations

import pytest

from dataferry.commit.manifest.files import read_manifest
from dataferry.commit.manifest.stages.save_manifest import save_task_manifest
from dataferry.errors import StoreError
from dataferry.store import FaultRule, Op, open_store

from .helpers import LAYOUT, assert_failed, assert_timed, write_attempt


def test_the_manifest_is_saved_under_its_tasks_name(store, ctx):
    manifest = write_attempt(store, 0, {"p=1/a": b"abc"}, save=False)
    final = save_task_manifest(ctx, manifest)
    assert final == LAYOUT.manifest_path(manifest.task_id)
    assert read_manifest(store, final) == manifest
    assert [s.name for s in store.list(LAYOUT.manifests_dir)] == [final.rsplit("/", 1)[1]]
    size = len(manifest.to_bytes(store))
    assert ctx.stats.snapshot()["maximums"]["committer_task_manifest_file_size.max"] == size
    assert_timed(ctx, "task_stage_save_manifest", "save_manifest")


def test_a_later_attempt_replaces_an_earlier_attempts_manifest(store, make_ctx):
    first = write_attempt(store, 0, {"a": b"1"}, attempt=0, save=False)
    second = write_attempt(store, 0, {"a": b"2", "b": b"2"}, attempt=1, save=False)
    save_task_manifest(make_ctx(), first)
    ctx = make_ctx()
    final = save_task_manifest(ctx, second)
    assert read_manifest(store, final).task_attempt_id == second.task_attempt_id
    assert len(store.list(LAYOUT.manifests_dir)) == 1
    assert_timed(ctx, "task_stage_save_manifest", "save_manifest")


def test_a_failed_rename_is_retried_and_too_many_fail_the_stage(tmp_path, make_ctx):
    rule = FaultRule(action="fail", kinds=frozenset({Op.RENAME}), times=1)
    store = open_store(str(tmp_path / "flaky"), faults=[rule])
    manifest = write_attempt(store, 0, {"a": b"x"}, save=False)
    ctx = make_ctx(store, save_retry_sleep_s=0.0)
    final = save_task_manifest(ctx, manifest)
    assert read_manifest(store, final) == manifest
    assert ctx.stats.counter("task_stage_save_summary_file.failures") == 1
    assert_timed(ctx, "task_stage_save_manifest", "save_manifest")

    rule.fired, rule.times = 0, -1  # every rename fails now
    ctx = make_ctx(store, save_retry_sleep_s=0.0, manifest_save_attempts=3)
    with pytest.raises(StoreError):
        save_task_manifest(ctx, manifest)
    assert ctx.stats.counter("task_stage_save_summary_file.failures") == 2  # then it gives up
    assert_failed(ctx, "task_stage_save_manifest", "save_manifest")
