"""`bench shuffle`: its profile (stages, pushers, services, CPU and memory per process role)
and its scale curve, on tiny sizes. What is measured is checked against what must be true of
the run, not against a speed."""

from __future__ import annotations

import pytest

from dataferry.bench.processes import ProcessSampler, role_by_command
from dataferry.bench.shuffle import ShuffleBenchSpec, run_shuffle_bench, run_shuffle_scale
from dataferry.bench.shuffle_profile import task_stages
from dataferry.bench.shuffle_reads import ReduceReads, read_reduction
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


def test_the_sampler_does_not_count_its_own_cpu_as_the_drivers():
    """The sampler reads every process ten times a second from a thread of the driver: its
    own CPU counted as the driver's made an idle driver look busy (and the shuffle costlier
    per GiB the longer a loaded machine made it run)."""
    import subprocess
    import sys
    import time

    pytest.importorskip("psutil")
    children = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"]) for _ in range(4)
    ]
    try:
        with ProcessSampler(interval_s=0.005) as sampler:
            time.sleep(1.5)  # the driver does nothing
    finally:
        for c in children:
            c.kill()
            c.wait()
    assert sampler._own_cpu > 0.02  # sampling that often costs
    assert sampler.result()["driver"]["cpu_s"] < sampler._own_cpu / 2


def test_service_commands_are_told_from_workers():
    class P:
        def __init__(self, cmd):
            self.cmd = cmd

        def cmdline(self):
            return self.cmd

    assert role_by_command(P(["python", "-m", "dataferry.cli", "shuffle", "serve"])) == "service"
    assert role_by_command(P(["python", "-m", "dataferry.shuffle.serve", "--port", "0"])) == (
        "service"
    )
    assert role_by_command(P(["python", "-c", "from multiprocessing.resource_tracker"])) == "other"
    assert role_by_command(P(["python", "-c", "spawn_main(tracker_fd=5)"])) == "worker"
    # a scheduler the bench started (across hosts) is the driver's, as in a LocalCluster
    assert role_by_command(P(["python", "-m", "distributed.cli.dask_scheduler"])) == "driver"
    # a server running beside the bench in the same process tree (a test's SeaweedFS or JVM)
    # runs no task: counted as a worker, it made the embedded engine's two workers three
    assert role_by_command(P(["/usr/bin/java", "-cp", "x", "MiniHdfs"])) == "other"
    assert role_by_command(P([".venv/bin/weed", "mini", "-dir=data"])) == "other"
    assert role_by_command(P(["ray::IDLE"])) == "worker"

    class Forked(P):
        def __init__(self, cmd, parent):
            super().__init__(cmd)
            self._parent = parent

        def parent(self):
            return self._parent

    server = Forked(["python", "-c", "from multiprocessing.forkserver import main"], P(["pytest"]))
    assert role_by_command(server) == "other"
    assert role_by_command(Forked(server.cmd, server)) == "worker"  # forked by the server
    # a pool worker of a checkout under .../shuffle/ (its forkserver's line names the path)
    line = ["python", "-c", "from multiprocessing.forkserver import main", "/src/shuffle/x.py"]
    assert role_by_command(Forked(line, Forked(line, P(["pytest"])))) == "worker"


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
        reads = by[method]["reads"]
        assert by[method]["merged_partitions"] == 6 and reads["merged_reads"] == 6
        # one host: every block merged by reference, so each is still read from its map output
        assert reads["ref_reads"] == 4 * 6 and reads["merged_in_place"] == 0
        assert by[method]["reduce_reads"] == 6 + 4 * 6 and reads["per_reduce"] == 5.0
        assert by[method]["rows"] == data["spec"]["rows"]
    assert by["pull"]["reduce_reads"] == by["pull"]["reads"]["original_reads"] == 4 * 6
    procs = by["push"]["processes"]
    assert procs["worker"]["processes"] == 2 and procs["service"]["processes"] == 2
    # the services were seen and measured (a process sampled has memory); their CPU is not
    # asserted: on one host they merge 4 MiB by reference, which can cost less than one clock
    # tick (10 ms) in the run's window; the workers read and write every row
    assert procs["service"]["peak_rss_mib"] > 0 and procs["service"]["cpu_s"] >= 0
    assert procs["worker"]["cpu_s"] > 0 and procs["worker"]["peak_rss_mib"] > 0
    assert by["push"]["cpu_s"] == pytest.approx(sum(p["cpu_s"] for p in procs.values()), abs=0.02)
    assert by["push"]["cpu_s_per_gib"] == pytest.approx(by["push"]["cpu_s"] * 256, rel=0.01)
    # no fewer reads than pull: more (the merged partitions of stubs on top)
    assert data["summary"]["local_read_reduction"] == 0.8


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
    assert by["push"]["reduce_reads"] == 6 + 4 * 6  # merged partitions, then blocks by ref
    # the cluster's idle CPU over the run's wall time, and what is left of the CPU beside it
    push_row = by["push"]
    assert push_row["idle_cpu_s"] > 0
    busy = (push_row["cpu_s"] - push_row["idle_cpu_s"]) / (4 / 1024)
    assert push_row["busy_cpu_s_per_gib"] == pytest.approx(max(0.0, busy), rel=0.02, abs=3)
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


def test_true_reads_count_every_block_read_by_reference():
    """A push shuffle whose blocks were all merged by reference (one host) reads each block
    from its map output after its merged partition of stubs: counting only the merged reads
    told users of 100x fewer reads than pull where there were more."""
    counters = {
        "reduce_merged_reads": 200,
        "reduce_merged_read_bytes": 200 * 5_100,
        "reduce_merged_blocks": 20_000,
        "reduce_ref_reads": 20_000,
        "reduce_ref_read_bytes": 20_000 * 53_000,
        "reduce_reads": 200,  # the service requests alone: not what is reported
    }
    push = ReduceReads.from_counters(counters, reduces=200)
    assert push.reads == 20_200 and push.per_reduce == 101.0
    assert push.merged_in_place == 0  # no block's bytes were in a merged chunk
    assert push.avg_read_bytes == round((200 * 5_100 + 20_000 * 53_000) / 20_200)
    pull = ReduceReads(200, original_reads=20_000, original_bytes=20_000 * 53_000)
    assert read_reduction(pull, push) == 0.99  # not 100.0
    # merged for real (across hosts): one read per reduce holds all its blocks
    merged = ReduceReads(200, merged_reads=200, merged_bytes=2**30, merged_blocks=20_000)
    assert merged.merged_in_place == 20_000 and read_reduction(pull, merged) == 100.0
    assert read_reduction(pull, ReduceReads(200)) is None


def test_the_floor_is_one_write_and_one_read_of_the_data_measured_in_the_run():
    """The floor printed beside the push is measured on the same disk in the same run: the
    data's size written with fdatasync and read back; the fraction is floor over wall time."""
    data = run_shuffle_bench(
        ShuffleBenchSpec(size=2 << 20, engines=("local",), methods=("push",), **TINY)
    )
    assert data["floor_s"] == pytest.approx(data["disk_limit_s"] + data["disk_read_s"], abs=0.01)
    assert data["disk_mb_s"] > 0 and data["disk_read_s"] > 0
    push = data["results"][0]["wall_s"]
    fraction = data["summary"]["local_push_floor_fraction"]
    assert fraction == pytest.approx(data["floor_s"] / push, rel=0.1, abs=0.01)


def test_a_given_scheduler_is_used_instead_of_a_local_cluster():
    """With `scheduler`, the bench connects to that cluster (one worker per host) and starts
    none of its own. Breaking it: the 3-host bench measures a LocalCluster on the driver host."""
    from dataferry.bench.shuffle import _cluster

    with _cluster(ShuffleBenchSpec(scheduler="tcp://10.0.0.1:8786", **TINY)) as address:
        assert address == "tcp://10.0.0.1:8786"
