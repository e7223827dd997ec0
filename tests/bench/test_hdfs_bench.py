"""The commit and Hive-load benchmarks on a real NameNode (the suite's MiniDFSCluster), at the
smallest shape: docs/benchmarks.md's HDFS figures come from these commands at full size."""

from __future__ import annotations

import pytest

from dataferry.bench.commit import CommitBenchSpec, run_commit_bench
from dataferry.bench.hive import HiveBenchSpec, run_hive_bench
from dataferry.store import open_store

pytestmark = pytest.mark.xdist_group("hdfs")


def test_bench_commit_on_hdfs_measures_its_floor_on_the_namenode(hdfs_url):
    """Each committer commits every file there, beside the same number of bare renames timed
    on the same NameNode. Were the floor taken on local disk (as for a directory), the ratio
    to it would compare HDFS to a disk and say nothing of the committer."""
    spec = CommitBenchSpec(
        committers=("manifest", "v1", "hive"), files=24, tasks=3, partitions=3, store=hdfs_url
    )
    data = run_commit_bench(spec).to_json()
    assert data["floor_on"].startswith(hdfs_url) and data["floor_s"] > 0
    assert {r["committer"]: r["files"] for r in data["results"]} == dict.fromkeys(
        ("manifest", "v1", "hive"), 24
    )
    assert all(r["ops"].get("op_rename", 0) >= 24 for r in data["results"])
    assert open_store(hdfs_url).walk("") == []  # every run's destination removed


def test_bench_hive_loads_on_hdfs(hdfs_url):
    """The staged load and the file-by-file load of the same tree, both on the NameNode: the
    figure beside the seed's story (a NameNode moving files one by one)."""
    spec = HiveBenchSpec(files=30, partitions=3, store=hdfs_url, modes=("one-by-one", "append"))
    data = run_hive_bench(spec)
    by = {r["mode"]: r for r in data["results"]}
    assert by["one-by-one"]["files_in_table"] == 30
    assert by["append"]["files_in_table"] == 33  # its 3 existing files kept
    assert by["append"]["ops"].get("op_rename", 0) > 0
