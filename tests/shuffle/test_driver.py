"""The driver's rules: merger choice, when to finalize, and never failing on a merger."""

from __future__ import annotations

import threading
import time

from dataferry.shuffle import (
    DriverConfig,
    MapStatus,
    PushCode,
    ShuffleClient,
    ShuffleDriver,
    ShuffleServiceProcess,
)


def status(m: int, size: int = 10, reduces: int = 4) -> MapStatus:
    return MapStatus(m, 0, "127.0.0.1:1", (size,) * reduces)


def test_mergers_take_contiguous_ranges_and_rotate():
    d = ShuffleDriver("a", 1, 2, 10, ["n0:1", "n1:1", "n2:1"])
    assert d.mergers == ("n1:1", "n2:1", "n0:1")  # rotated by shuffle id
    assert [d.target.merger_of(r) for r in range(10)] == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    few = ShuffleDriver(
        "a", 0, 2, 10, ["n0:1"], config=DriverConfig(mergers_min_static_threshold=2)
    )
    assert not few.push_enabled  # too few services: push is off, reducers pull


def test_small_shuffles_finalize_at_once_and_ignore_results(tmp_path):
    with ShuffleServiceProcess(str(tmp_path)) as svc:
        d = ShuffleDriver("a", 0, 2, 4, [svc.address])  # default: wait only past 500 MiB
        for m in range(2):
            d.map_finished(status(m))
        assert d.finalize() == {}
        assert not d.finalize_report.used and d.finalize_report.mergers_ok == [svc.address]


def test_finalize_waits_for_push_completion_ratio_or_timeout(tmp_path):
    with ShuffleServiceProcess(str(tmp_path)) as svc:
        cfg = DriverConfig(min_shuffle_size_to_wait=0, finalize_timeout_s=0.5)
        d = ShuffleDriver("a", 0, 2, 4, [svc.address], config=cfg)
        d.map_finished(status(0), pushed=True)
        d.map_finished(status(1), pushed=False)  # still pushing in the background
        t0 = time.monotonic()
        d.finalize()
        assert 0.45 <= time.monotonic() - t0 < 5  # waited for the timeout
        assert d.stats.counter("finalize_timed_out") == 1

        cfg = DriverConfig(min_shuffle_size_to_wait=0, finalize_timeout_s=30)
        d = ShuffleDriver("a", 1, 2, 4, [svc.address], config=cfg)
        d.map_finished(status(0), pushed=True)
        d.map_finished(status(1), pushed=False)
        threading.Timer(0.2, d.push_finished, args=(1,)).start()
        t0 = time.monotonic()
        d.finalize()
        assert time.monotonic() - t0 < 5  # the last push completion finalized early


def test_background_push_completions_are_collected_from_the_mergers(tmp_path):
    """Maps that push in the background finish before their pushes: the driver asks the
    mergers which maps said PUSH_DONE and finalizes as soon as every map has, well within
    its timeout; a map whose completion never comes is waited for until the timeout only."""
    with (
        ShuffleServiceProcess(str(tmp_path / "a")) as a,
        ShuffleServiceProcess(str(tmp_path / "b")) as b,
    ):
        cfg = DriverConfig(min_shuffle_size_to_wait=0, finalize_timeout_s=30)
        d = ShuffleDriver("a", 7, 3, 4, [a.address, b.address], config=cfg)
        for m in range(3):
            d.map_finished(status(m))  # background pushes (the default): not complete yet
        for m in range(3):
            ShuffleClient(a.address).push_done("a", 7, 0, m)

        def the_last_completion() -> None:
            for m in range(3):  # a map is complete once every merger has its PUSH_DONE
                ShuffleClient(b.address).push_done("a", 7, 0, m)

        threading.Timer(0.5, the_last_completion).start()
        t0 = time.monotonic()
        d.finalize()
        waited = time.monotonic() - t0
        assert 0.45 <= waited < 10 and d.stats.counter("finalize_timed_out") == 0
        assert d.stats.counter("push_completion_polls") >= 2
        assert ShuffleClient(a.address).push_done("a", 7, 0, 0) == PushCode.TOO_LATE

        cfg = DriverConfig(min_shuffle_size_to_wait=0, finalize_timeout_s=0.5)
        d = ShuffleDriver("a", 8, 2, 4, [a.address, "127.0.0.1:9"], config=cfg)
        d.map_finished(status(0))
        d.map_finished(status(1))
        ShuffleClient(a.address).push_done("a", 8, 0, 0)  # map 1 never completes
        t0 = time.monotonic()
        d.finalize()
        assert 0.45 <= time.monotonic() - t0 < 10
        assert d.stats.counter("finalize_timed_out") == 1
        assert d.stats.counter("push_completion_mergers_gone") == 1  # 127.0.0.1:9

        d = ShuffleDriver("a", 9, 1, 4, ["127.0.0.1:9"], config=cfg)
        d.map_finished(status(0))
        t0 = time.monotonic()
        d.finalize()  # no merger answers: nothing to wait for
        assert time.monotonic() - t0 < 0.45 and d.stats.counter("finalize_timed_out") == 0


def test_a_failed_merger_never_fails_the_stage(tmp_path):
    with ShuffleServiceProcess(str(tmp_path)) as svc:
        cfg = DriverConfig(min_shuffle_size_to_wait=0, results_timeout_s=5)
        d = ShuffleDriver("a", 0, 2, 4, [svc.address, "127.0.0.1:9"], config=cfg)
        for m in range(2):
            d.map_finished(status(m))
        assert d.finalize() == {}  # nothing was pushed
        assert list(d.finalize_report.mergers_failed) == ["127.0.0.1:9"]
        assert d.finalize_report.mergers_ok == [svc.address]


def test_first_finished_attempt_wins():
    d = ShuffleDriver("a", 0, 1, 4, [])
    assert d.map_finished(MapStatus(0, 1, "x:1", (1, 2, 3, 4)))
    assert not d.map_finished(MapStatus(0, 0, "y:1", (1, 2, 3, 4)))  # the speculative loser
    assert d.map_statuses()[0].attempt == 1
