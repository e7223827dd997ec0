"""`bench shuffle`: its profile (stages, pushers, services, CPU and memory per process role)
and its scale curve, on tiny sizes. What is measured is checked against what must be true of
the run, not against a speed."""

from __future__ import annotations

import pytest

from dataferry.bench.processes import ProcessSampler, role_by_command
from dataferry.bench.shuffle import (
    ShuffleBenchSpec,
    floor_s,
    run_shuffle_bench,
    run_shuffle_scale,
)
from dataferry.bench.shuffle_profile import task_stages
from dataferry.errors import ConfigError

TINY = {"maps": 4, "reduces": 6, "workers": 2}


def test_task_stages_group_a_shuffles_tasks_by_stage():
    def task(key, start, stop):
        return {"key": key, "startstops": [{"action": "compute", "start": start, "stop": stop}]}

    stream = [
        task("dataferry-shuffle-begin-dask-1a2b", 10.0, 10.1),
        task("dataferry-shuffle-map-dask-1a2b-0", 10.1, 11.0),
        task("dataferry-shuffle-map-dask-1a2b-1", 10.2, 11.5),
        task("dataferry-shuffle-barrier-dask-1a2b", 11.6, 11.7),
        task(("dataferry-shuffle_reduce_dask_1a2b-0123456789abcdef", 0), 11.8, 12.0),  # fused
        task(("dataferry-0123456789abcdef0123456789abcdef", 1), 11.8, 11.81),  # not fused: its id
        task(("shuffle_reduce_dask_1a2b-0123456789abcdef", 1), 11.81, 12.0),  # and the reduce
        task(("shuffle-transfer-0123456789abcdef0123456789abcdef", 3), 12.0, 12.5),
        {"key": "x", "startstops": [{"action": "transfer", "start": 9.0, "stop": 20.0}]},
    ]
    stages = {s["stage"]: s for s in task_stages(stream)}
    assert list(stages) == ["begin", "map", "barrier", "reduce", "reduce id", "shuffle-transfer"]
    assert stages["reduce"]["tasks"] == 2 and stages["reduce id"]["tasks"] == 1
    assert stages["map"]["tasks"] == 2 and stages["map"]["busy_s"] == pytest.approx(2.2)
    assert (stages["map"]["from_s"], stages["map"]["to_s"]) == (0.1, 1.5)
    assert stages["shuffle-transfer"]["to_s"] == 2.5  # transfers are not compute


def test_the_sampler_counts_cpu_and_peak_memory_by_role():
    psutil = pytest.importorskip("psutil")
    with ProcessSampler(interval_s=0.02) as sampler:
        grow = bytearray(64 * 1024 * 1024)  # this process's peak grows by 64 MiB
        sum(range(3_000_000))  # and it spends CPU
    result = sampler.result()
    assert result["driver"]["processes"] == 1 and result["driver"]["cpu_s"] > 0
    rss_now = psutil.Process().memory_info().rss / 2**20
    assert result["driver"]["peak_rss_mib"] >= min(rss_now, 64)
    del grow


def test_service_commands_are_told_from_workers():
    class P:
        def __init__(self, cmd):
            self.cmd = cmd

        def cmdline(self):
            return self.cmd

    assert role_by_command(P(["python", "-m", "dataferry.cli", "shuffle", "serve"])) == "service"
    assert role_by_command(P(["python", "-c", "from multiprocessing.resource_tracker"])) == "other"
    assert role_by_command(P(["python", "-c", "spawn_main(tracker_fd=5)"])) == "worker"

    class Forked(P):
        def __init__(self, cmd, parent):
            super().__init__(cmd)
            self._parent = parent

        def parent(self):
            return self._parent

    server = Forked(["python", "-c", "from multiprocessing.forkserver import main"], P(["pytest"]))
    assert role_by_command(server) == "other"
    assert role_by_command(Forked(server.cmd, server)) == "worker"  # forked by the server


def test_the_methods_run_in_reverse_every_other_round():
    said: list[str] = []
    run_shuffle_bench(
        ShuffleBenchSpec(
            size=1 << 20, engines=("local",), methods=("pull", "push"), repeats=2, **TINY
        ),
        said.append,
    )
    # no method always runs after the same one
    runs = [m for m in said if m.startswith("local ")]
    assert runs == ["local pull", "local push", "local push", "local pull"]


def test_the_embedded_engine_reports_processes_and_both_pushes():
    data = run_shuffle_bench(
        ShuffleBenchSpec(
            size=4 << 20, engines=("local",), methods=("pull", "push", "push-sync"), **TINY
        )
    )
    by = {r["method"]: r for r in data["results"]}
    assert set(by) == {"pull", "push", "push-sync"}
    for method in ("push", "push-sync"):  # background or not, the same merge and reads
        assert by[method]["merged_partitions"] == 6 and by[method]["reduce_reads"] == 6
        assert by[method]["rows"] == data["spec"]["rows"]
    assert by["pull"]["reduce_reads"] == 4 * 6
    procs = by["push"]["processes"]
    assert procs["worker"]["processes"] == 2 and procs["service"]["processes"] == 2
    assert procs["service"]["cpu_s"] > 0 and procs["worker"]["peak_rss_mib"] > 0
    assert data["summary"]["local_read_reduction"] == 4.0


def test_a_dask_push_is_profiled_stage_by_stage():
    pytest.importorskip("distributed")
    data = run_shuffle_bench(
        ShuffleBenchSpec(
            size=4 << 20, engines=("dask",), methods=("push", "dask-p2p"), hold=False, **TINY
        )
    )
    by = {r["method"]: r for r in data["results"]}
    push = by["push"]["profile"]
    stages = {s["stage"]: s for s in push["stages"]}
    assert stages["map"]["tasks"] == 4 and stages["reduce"]["tasks"] == 6
    assert stages["barrier"]["tasks"] == 1
    assert stages["barrier"]["from_s"] >= stages["map"]["to_s"] - 0.01  # after every map
    assert push["push"]["maps"] == 4  # every map was pushed by its worker's pusher
    # every reducer shares its mergers' host: merged files are read from their directories
    # (host-local reads), none is served through a service
    assert push["merge"]["blocks"] == 4 * 6 and push["merge"]["served_mib"] == 0
    assert by["push"]["processes"]["service"]["processes"] == 2
    assert by["push"]["reduce_reads"] == 6
    p2p = {s["stage"] for s in by["dask-p2p"]["profile"]["stages"]}
    assert not p2p & {"map", "barrier", "reduce"} and p2p  # Dask's own stages
    assert by["dask-p2p"]["profile"]["push"]["maps"] == 0


def test_the_scale_curve_is_per_size_and_per_gib():
    data = run_shuffle_scale(
        ShuffleBenchSpec(engines=("local",), methods=("push",), **TINY), [4 << 20, 2 << 20]
    )
    rows = data["scale"]
    assert [r["gib"] for r in rows] == [round(4 / 1024, 2), round(2 / 1024, 2)]  # as asked
    assert rows[1]["vs_smallest"] == 1.0  # against the smallest size, wherever it ran
    assert rows[0]["vs_smallest"] == round(rows[0]["s_per_gib"] / rows[1]["s_per_gib"], 2)
    for r, run in zip(rows, data["runs"], strict=True):
        assert r["s_per_gib"] == run["results"][0]["s_per_gib"]
        assert r["worker_rss_mib"] and r["service_rss_mib"]


def test_unknown_methods_are_refused():
    with pytest.raises(ConfigError, match="unknown methods"):
        ShuffleBenchSpec(methods=("push", "magic"))


def test_the_floor_is_one_disk_write_and_three_memory_copies():
    # 1 GB at 500 MB/s to disk, then read, encode and decode at 1000 MB/s on each of 2 cores
    assert floor_s(10**9, 500.0, 1000.0, 2) == pytest.approx(2.0 + 1.5)
    data = run_shuffle_bench(
        ShuffleBenchSpec(size=2 << 20, engines=("local",), methods=("push",), **TINY)
    )
    floor = floor_s(2 << 20, data["disk_mb_s"], data["memory_mb_s"], 2)  # what it measured
    assert data["floor_s"] == pytest.approx(floor, rel=0.1, abs=1e-3)
    push = data["results"][0]["wall_s"]
    assert data["summary"]["local_push_vs_floor"] == pytest.approx(push / floor, rel=0.1)
