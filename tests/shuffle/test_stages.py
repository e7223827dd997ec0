"""The shuffle's multi-step algorithms on the stage base: the driver's plan, finalize and
remove, and the pusher's plan, randomize, send and react; the service's start and stop
logged at INFO."""

from __future__ import annotations

import logging

import pytest

from dataferry.shuffle import (
    DriverConfig,
    MapStatus,
    PushCode,
    PushConfig,
    PushTarget,
    ShuffleDriver,
    ShuffleService,
    push_map_output,
    register_app,
    write_map_output,
)
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.shuffle.pusher import plan, randomize, react
from dataferry.stages import StageRun
from dataferry.stats import IOStatistics
from dataferry.store import LocalStore

APP = "app-stages"


@pytest.fixture
def service(tmp_path):
    with ShuffleService(LocalStore(str(tmp_path / "node"))) as svc:
        svc.directory = str(tmp_path / "node")
        svc.creds = register_app(APP, [svc.address], "")
        yield svc


def test_the_service_logs_its_start_and_stop_at_info(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="dataferry.shuffle")
    svc = ShuffleService(LocalStore(str(tmp_path))).start()
    address = svc.address
    svc.stop()
    svc.stop()  # a second stop stops nothing and says nothing
    lines = [r.getMessage() for r in caplog.records if r.name == "dataferry.shuffle"]
    assert lines == [
        f"shuffle service listening on {address} (plain, no TLS)",
        f"shuffle service on {address} stopped",
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "dataferry.shuffle")


def test_driver_stages_are_timed_logged_and_keep_the_report(service, caplog):
    caplog.set_level(logging.INFO, logger="dataferry.shuffle")
    reduces = 4
    store = LocalStore(service.directory)
    cfg = DriverConfig(min_shuffle_size_to_wait=0, finalize_timeout_s=5)
    d = ShuffleDriver(
        APP,
        3,
        2,
        reduces,
        [service.address],
        credentials=service.creds,
        config=cfg,
        push=PushConfig(background=False),
    )
    for m in range(2):
        offsets = write_map_output(store, APP, 3, m, 0, [bytes([m]) * 300] * reduces)
        assert push_map_output(store, d.target, m, 0, offsets).blocks == reduces
        d.map_finished(MapStatus(m, 0, service.address, block_sizes(offsets)))
    merged = d.finalize()
    assert sorted(merged) == list(range(reduces))
    report = d.finalize_report
    assert report.used and report.mergers_ok == [service.address] and not report.mergers_failed
    assert report.merged_partitions == reduces
    assert report.merged_bytes == sum(p.size for p in merged.values())
    assert d.remove() == {service.address: True}
    assert set(d.run.stage_seconds) == {"plan", "finalize_wait", "finalize_rpc", "remove"}
    assert d.run.failed_stage == "" and d.run.last_stage == "shuffle_stage_remove"
    for name in ("plan", "finalize_wait", "finalize_rpc", "remove"):
        assert d.stats.counter(f"shuffle_stage_{name}") == 1
    lines = [r.getMessage() for r in caplog.records if "stage" in r.getMessage()]
    assert [line.split(": ")[1] for line in lines] == [
        "stage plan",
        "stage finalize_wait",
        "stage finalize_rpc",
        "stage remove",
    ]
    assert all(line.startswith(f"shuffle {APP}/3: ") for line in lines)


def test_pusher_stages_run_per_map_output_at_debug(service, caplog):
    caplog.set_level(logging.INFO, logger="dataferry.shuffle")
    store = LocalStore(service.directory)
    offsets = write_map_output(store, APP, 4, 0, 0, [b"x" * 100] * 6)
    target = PushTarget(APP, 4, 0, 6, (service.address,), service.creds)
    report = push_map_output(store, target, 0, 0, offsets)
    assert report.blocks == 6
    assert not [r for r in caplog.records if "stage" in r.getMessage()]  # DEBUG stages: quiet
    caplog.clear()
    caplog.set_level(logging.DEBUG, logger="dataferry.shuffle")
    offsets = write_map_output(store, APP, 4, 1, 0, [b"y" * 100] * 6)
    stats = IOStatistics()
    assert push_map_output(store, target, 1, 0, offsets, stats).blocks == 6
    exits = [
        r.getMessage().split(": ")[1]
        for r in caplog.records
        if r.levelno == logging.DEBUG and "starting" not in r.getMessage()
    ]
    assert exits[:2] == ["stage plan", "stage randomize"] and exits[-1] == "stage send"
    assert "stage react" in exits
    for name in ("plan", "randomize", "send"):
        assert stats.counter(f"push_stage_{name}") == 1
    assert stats.counter("push_stage_react") == report.requests
    assert stats.counter("push_blocks") == 6  # the statistics callers read are still there


def test_plan_and_randomize_alone():
    cfg = PushConfig(max_block_batch_size=250)
    target = PushTarget(APP, 0, 0, 4, ("a:1", "b:1"), config=cfg)
    run = StageRun()
    requests = plan(run, target, [0, 100, 200, 300, 400])
    assert [(r.merger, [b for b, _ in r.blocks]) for r in requests] == [(0, [0, 1]), (1, [2, 3])]

    class Push:  # what randomize reads of a push
        def __init__(self, announce: bool, mergers: int = 3) -> None:
            self.target = PushTarget(APP, 0, 0, 4, tuple(f"m{i}:1" for i in range(mergers)))
            self.announce = announce

        def seed(self, *more: object) -> str:
            return "0/0/0"

    by = randomize(StageRun(), Push(False), requests)  # type: ignore[arg-type]
    assert set(by) == {0, 1}
    by = randomize(StageRun(), Push(True), requests)  # type: ignore[arg-type]
    assert set(by) == {0, 1, 2} and by[2] == []  # every merger hears the push completion


def test_react_says_what_each_answer_means():
    run = StageRun()
    batch = [(r, 30 * r, 30) for r in range(5)]
    codes = [
        PushCode.SUCCESS,
        PushCode.DUPLICATE,
        PushCode.BUSY,
        PushCode.TOO_LATE,
        PushCode.SUCCESS,
    ]
    r = react(run, batch, codes, True)
    assert r.blocks == 3 and r.bytes == 90 and [b[0] for b in r.retry] == [2]
    assert r.stop == "TOO_LATE" and not r.quota
    last = react(run, batch[2:3], [PushCode.BUSY], False)  # no retries left: given up
    assert last.retry == [] and last.blocks == 0
    assert react(run, batch[:1], [PushCode.QUOTA], True).quota
    assert run.stats.counter("push_stage_react") == 3
