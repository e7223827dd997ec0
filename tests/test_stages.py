"""The one stage base: runs once, timed into IOStatistics, logged, failure marked."""

from __future__ import annotations

import logging
import pickle
import threading
import time

import pytest

from dataferry.stages import Stage, StageAlreadyRun, StageRun, stage
from dataferry.stats import IOStatistics

LOGGER = "dataferry.test_stages"


def run_for_test(**kwargs) -> StageRun:
    return StageRun(logger=logging.getLogger(LOGGER), **kwargs)


@stage("test_stage_load", "load")
def load(run: StageRun, n: int, *, extra: int = 0) -> int:
    run.stats.incr("files_loaded", n)
    return n + extra


@stage("test_stage_fail", "fail")
def fail(run: StageRun) -> None:
    raise ValueError("disk on fire")


@stage("test_stage_block", "block", level=logging.DEBUG)
def block(run: StageRun) -> str:
    run.stats.incr("blocks")
    return "ok"


def test_a_stage_object_runs_once():
    run = run_for_test()
    one = Stage(lambda r, x: x * 2, "test_stage_once", "once")
    assert one.run(run, 21) == 42 and one.done and one.seconds >= 0
    with pytest.raises(StageAlreadyRun, match="once"):
        one.run(run, 1)
    assert run.stats.counter("test_stage_once") == 1  # the refused run recorded nothing
    assert run.stage_seconds["once"] == one.seconds


def test_each_call_of_a_decorated_stage_is_one_execution():
    run = run_for_test()
    assert load(run, 3, extra=1) == 4
    assert load(run, 2) == 2
    assert run.stats.counter("test_stage_load") == 2
    assert run.stats.counter("files_loaded") == 5
    assert load.statistic == "test_stage_load" and load.stage_name == "load"
    assert load.__name__ == "load"  # functools.wraps


def test_duration_recorded_in_iostatistics_and_stage_seconds_accumulate():
    @stage("test_stage_sleep", "sleep")
    def sleep(run: StageRun, s: float) -> None:
        time.sleep(s)

    run = run_for_test()
    sleep(run, 0.02)
    first = run.stage_seconds["sleep"]
    sleep(run, 0.02)
    assert first >= 0.02 and run.stage_seconds["sleep"] >= first + 0.02
    snap = run.stats.snapshot()
    assert snap["counters"]["test_stage_sleep"] == 2
    mean = snap["meanstatistics"]["test_stage_sleep.mean"]
    assert mean["samples"] == 2 and mean["sum"] >= 40  # milliseconds, as Hadoop keeps them
    assert snap["maximums"]["test_stage_sleep.max"] >= 20
    seconds = run.seconds()
    assert seconds["total"] >= seconds["sleep"] and set(seconds) == {"sleep", "total"}


def test_last_and_failed_stage_and_the_failure_counter():
    run = run_for_test()
    load(run, 1)
    assert run.last_stage == "test_stage_load" and run.failed_stage == ""
    with pytest.raises(ValueError, match="disk on fire"):
        fail(run)
    assert run.last_stage == "test_stage_fail" and run.failed_stage == "test_stage_fail"
    assert run.stats.counter("test_stage_fail.failures") == 1
    assert run.stats.counter("test_stage_fail") == 0
    assert "fail" in run.stage_seconds  # a failed stage's time is kept too
    load(run, 1)  # the first failure stays the one named
    assert run.last_stage == "test_stage_load" and run.failed_stage == "test_stage_fail"


def test_the_innermost_failing_stage_is_the_one_marked():
    @stage("test_stage_outer", "outer")
    def outer(run: StageRun) -> None:
        fail(run)

    run = run_for_test()
    with pytest.raises(ValueError):
        outer(run)
    assert run.failed_stage == "test_stage_fail"
    assert run.stats.counter("test_stage_outer.failures") == 1


def test_exit_logged_at_info_with_seconds_and_moved_counters(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    run = run_for_test(label="job_0001")
    run.stats.incr("files_loaded", 10)  # before the stage: not what it moved
    load(run, 3)
    (rec,) = [r for r in caplog.records if r.name == LOGGER]
    assert rec.levelno == logging.INFO
    msg = rec.getMessage()
    assert msg.startswith("job_0001: stage load: ") and " s (" in msg
    assert "files_loaded=+3" in msg
    assert "test_stage_load" not in msg  # its own duration counter is not news
    float(msg.split(": ")[2].split(" s")[0])  # the seconds are a number


def test_a_counter_sharing_the_statistics_prefix_is_still_shown(caplog):
    @stage("test_stage_rename", "rename")
    def rename(run: StageRun) -> None:
        run.stats.incr("test_stage_rename_files", 7)

    caplog.set_level(logging.INFO, logger=LOGGER)
    rename(run_for_test())
    assert "test_stage_rename_files=+7" in caplog.records[-1].getMessage()


def test_entry_logged_at_debug_and_debug_stages_only_at_debug(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    run = run_for_test()
    block(run)
    assert not [r for r in caplog.records if r.name == LOGGER]  # a DEBUG stage at INFO: silent
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    load(run, 1)
    block(run)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert lines[0] == (logging.DEBUG, "stage load: starting")
    assert lines[1][0] == logging.INFO and lines[1][1].startswith("stage load: ")
    assert lines[2] == (logging.DEBUG, "stage block: starting")
    assert lines[3][0] == logging.DEBUG and "blocks=+1" in lines[3][1]


def test_failure_logged_and_reraised(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    with pytest.raises(ValueError) as info:
        fail(run_for_test())
    assert str(info.value) == "disk on fire"
    rec = caplog.records[-1]
    assert rec.levelno >= logging.INFO
    assert "stage fail failed after" in rec.getMessage()
    assert "ValueError: disk on fire" in rec.getMessage()


def test_a_float_counter_does_not_break_the_exit_line(caplog):
    @stage("test_stage_float", "float")
    def floaty(run: StageRun) -> int:
        run.stats.set_counter("ratio", 0.5)  # type: ignore[arg-type]
        return 1

    caplog.set_level(logging.INFO, logger=LOGGER)
    assert floaty(run_for_test()) == 1
    assert "ratio=+0.5" in caplog.records[-1].getMessage()


def test_the_first_argument_must_be_a_stage_run():
    with pytest.raises(TypeError, match="StageRun, not IOStatistics"):
        load(IOStatistics(), 1)
    with pytest.raises(TypeError, match="first argument"):
        load(3)


def test_a_subclass_of_stage_run_is_accepted():
    from dataclasses import dataclass

    @dataclass
    class JobRun(StageRun):
        job_id: str = ""

    run = JobRun(job_id="j", logger=logging.getLogger(LOGGER))
    assert load(run, 2) == 2 and run.stage_seconds["load"] >= 0


def test_stages_ending_on_many_threads_lose_no_seconds():
    run = run_for_test()
    per_thread = 200

    def work() -> None:
        for _ in range(per_thread):
            block(run)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert run.stats.counter("test_stage_block") == 4 * per_thread
    assert run.stats.counter("blocks") == 4 * per_thread


def test_a_stage_run_pickles():
    run = run_for_test(label="x")
    load(run, 1)
    back = pickle.loads(pickle.dumps(run))
    assert back.stage_seconds == run.stage_seconds and back.logger is run.logger
    assert back.stats.counter("files_loaded") == 1


def test_the_library_logs_nothing_to_stderr_at_the_default_level(capsys):
    import dataferry  # noqa: F401  (adds the NullHandler)

    run = StageRun()  # the default logger, "dataferry"
    load(run, 1)
    with pytest.raises(ValueError):
        fail(run)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_the_write_plan_is_staged_and_logs_one_info_line(caplog):
    """The write path's sizing: its steps are DEBUG stages, the plan one INFO line."""
    import pyarrow as pa

    from dataferry.dataset.options import WriteOptions
    from dataferry.dataset.sizing import plan_tasks

    caplog.set_level(logging.DEBUG, logger="dataferry.dataset")
    t = pa.table({"k": ["a", "b"] * 500, "v": list(range(1000))})
    plan = plan_tasks(t, ("k",), WriteOptions(), workers=4)
    assert plan.stats["partitions"] == 2 and plan.stats["tasks"] == len(plan.tasks) == 1
    assert {"rows", "workers", "row_bytes", "encoded_ratio", "pieces", "task_bytes"} <= set(
        plan.stats
    )
    records = [r for r in caplog.records if r.name == "dataferry.dataset"]
    exits = [
        r.getMessage()
        for r in records
        if "stage" in r.getMessage() and "starting" not in r.getMessage()
    ]
    assert [m.split(": ")[1] for m in exits] == [
        "stage split_partitions",
        "stage measure",
        "stage cut_files",
        "stage pack_tasks",
    ]
    info = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert len(info) == 1 and info[0].startswith("write plan: 1000 rows in 2 partitions, 1 tasks")
