"""The commit benchmark measures what its name says; no timing assertions here."""

from __future__ import annotations

import pytest

from dataferry.bench import commit_hadoop
from dataferry.bench.commit import CommitBenchSpec, _file_layout, run_commit_bench
from dataferry.bench.processes import PeakRss


def test_layout_spreads_every_task_over_the_partitions():
    spec = CommitBenchSpec(files=100, tasks=4, partitions=10)
    layouts = [_file_layout(spec, t) for t in range(4)]
    assert sum(len(files) for files in layouts) == 100
    assert all(len({f.split("/")[0] for f in files}) == 10 for files in layouts)
    assert len({f for files in layouts for f in files}) == 100


def test_small_run_on_a_store_model():
    spec = CommitBenchSpec(
        committers=("v1", "manifest"),
        files=60,
        tasks=3,
        partitions=4,
        store="sim:hdfs",
        io_threads=8,
    )
    report = run_commit_bench(spec)
    data = report.to_json()
    by = {r["committer"]: r for r in data["results"]}
    assert set(by) == {"v1", "manifest"}
    for r in by.values():
        assert r["files"] == 60 and r["job_commit_s"] > 0 and r["limit_s"] > 0
    # manifest's job commit renames each file once; v1's merge plan asks the destination once
    # per directory (a bench counting a probe per file would be measuring Hadoop's old plan).
    # HDFS closes slowly: the intent written ahead beside the claim is renamed into place
    assert by["manifest"]["ops"]["op_rename"] == 60 + 1 + 1  # and _SUCCESS
    v1 = by["v1"]["ops"]
    assert 0 < v1["op_get_file_status"] + v1.get("op_get_file_status.failures", 0) < 30
    assert set(by["manifest"]["stages"]) >= {"load_manifests", "rename_files", "cleanup"}
    assert data["floor_s"] is None


def test_local_run_measures_the_rename_floor():
    spec = CommitBenchSpec(committers=("manifest",), files=50, tasks=2, partitions=2, store="local")
    report = run_commit_bench(spec)
    assert report.floor_s and report.floor_s > 0
    assert report.results[0].limit_s == report.floor_s
    assert report.results[0].job_rss_growth_mib is not None  # Linux keeps the peak


def test_peak_rss_sees_a_peak_that_is_gone_by_the_end():
    with PeakRss() as memory:
        grown = bytearray(48 * 2**20)
        grown[::4096] = b"x" * len(grown[::4096])  # every page touched
        del grown
    assert memory.growth_mib is not None and memory.growth_mib >= 40
    with PeakRss() as calm:
        sum(range(1000))
    assert calm.growth_mib is not None and calm.growth_mib < 8  # the peak was reset


def test_kill_at_times_a_recovery_that_finishes_the_killed_commit():
    spec = CommitBenchSpec(
        committers=("manifest",), files=200, tasks=4, partitions=4, store="local", kill_at=0.5
    )
    report = run_commit_bench(spec)
    rec = report.results[0].recovery
    assert rec is not None and rec.killed and rec.outcome == "rolled forward"
    assert rec.ops.get("op_rename", 0) == 100 + 1  # the other half, and _SUCCESS
    assert report.results[0].recovery_to_rest is not None


def test_hadoop_peer_is_skipped_with_its_reason_off_local_disk():
    spec = CommitBenchSpec(
        committers=("v1",), files=8, tasks=2, partitions=2, store="sim:hdfs", hadoop=True
    )
    data = run_commit_bench(spec).to_json()
    assert "local" in data["hadoop"]["skipped"]


@pytest.mark.skipif(commit_hadoop.missing() is not None, reason="needs Java 17 and pyspark")
def test_hadoop_peers_are_v1_and_its_own_manifest_committer(capsys):
    """With dataferry's `manifest` in the run, Hadoop's own ManifestCommitter runs beside
    Hadoop's v1 on the same job (the peer of a manifest task commit, which lists the attempt
    and saves a manifest, where v1's renames one directory), and both are shown."""
    from dataferry.cli.bench_commit import _render_hadoop

    spec = CommitBenchSpec(
        committers=("v1", "manifest"), files=8, tasks=2, partitions=2, store="local", hadoop=True
    )
    data = run_commit_bench(spec).to_json()
    peer = data["hadoop"]
    for theirs in (peer, peer["manifest"]):
        assert theirs["job_commit_s"] > 0 and theirs["task_commit_median_s"] > 0
        assert len(theirs["runs"]) == 1
    assert all(r["task_commit_median_s"] > 0 for r in data["results"])
    _render_hadoop(data)
    shown = capsys.readouterr().out
    assert "hadoop manifest" in shown and "dataferry manifest" in shown
    only_v1 = CommitBenchSpec(
        committers=("v1",), files=4, tasks=2, partitions=2, store="local", hadoop=True
    )
    assert "manifest" not in run_commit_bench(only_v1).to_json()["hadoop"]


def test_hadoop_s3a_peer_is_skipped_with_its_reason_off_s3():
    """`--hadoop-s3a` on a store that is not an S3 server says why Hadoop's magic committer
    did not run, rather than running nothing silently or failing the bench."""
    spec = CommitBenchSpec(
        committers=("v1",), files=8, tasks=2, partitions=2, store="sim:hdfs", hadoop_s3a=True
    )
    data = run_commit_bench(spec).to_json()
    assert "S3 server" in data["hadoop_s3a"]["skipped"]
    assert data["hadoop"] is None


def test_hadoop_s3a_takes_an_s3_store_or_a_local_server():
    """`--hadoop-s3a` runs beside a real S3 server named by `--store s3://...` (SeaweedFS), not
    only moto's; on any other store it is refused before anything runs, saying what it needs."""
    from typer.testing import CliRunner

    from dataferry.cli import app

    args = ["bench", "commit", "--hadoop-s3a", "--committers", "v1", "--files", "4"]
    refused = CliRunner().invoke(app, [*args, "--store", "sim:hdfs"])
    assert refused.exit_code != 0
    assert "an s3:// --store" in refused.output
