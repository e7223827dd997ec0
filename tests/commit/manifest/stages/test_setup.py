"""The setup stages alone: job setup makes the job attempt and manifests directories, task
setup the task attempt's; neither reuses a directory that exists."""

from __future__ import annotations

import pytest

from dataferry.commit.manifest.stages.setup import setup_job, setup_task
from dataferry.errors import CommitError, DestinationError
from dataferry.store import FaultRule, Op, open_store

from .helpers import LAYOUT, assert_failed, assert_timed, attempt_dir


def test_job_setup_makes_the_job_attempt_and_manifests_directories(store, ctx):
    assert setup_job(ctx) is None
    assert store.stat(LAYOUT.job_attempt_dir).is_dir
    assert store.stat(LAYOUT.manifests_dir).is_dir
    assert [s.path for s in store.walk("") if not s.is_dir] == []  # directories only
    assert_timed(ctx, "job_stage_setup", "setup")


def test_job_setup_refuses_a_job_attempt_directory_that_exists(store, make_ctx):
    setup_job(make_ctx())
    again = make_ctx()
    with pytest.raises(CommitError, match=r"job attempt directory .* already exists"):
        setup_job(again)
    assert_failed(again, "job_stage_setup", "setup")


def test_job_setup_on_a_destination_it_may_not_write_names_it(tmp_path, make_ctx):
    denied = open_store(
        str(tmp_path / "ro"), faults=[FaultRule(action="deny", kinds=frozenset({Op.MKDIRS}))]
    )
    ctx = make_ctx(denied)
    with pytest.raises(DestinationError, match="is not writable"):
        setup_job(ctx)
    assert_failed(ctx, "job_stage_setup", "setup")


def test_task_setup_makes_its_attempt_directory_once(store, make_ctx):
    ctx = make_ctx()
    setup_task(ctx, attempt_dir(3))
    assert store.stat(attempt_dir(3)).is_dir
    assert_timed(ctx, "task_stage_setup", "task_setup")
    again = make_ctx()
    with pytest.raises(CommitError, match=r"task attempt directory .* already exists"):
        setup_task(again, attempt_dir(3))
    assert_failed(again, "task_stage_setup", "task_setup")
