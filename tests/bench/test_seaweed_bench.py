"""The commit benchmark on a real S3 server (the suite's SeaweedFS), at the smallest shape:
docs/benchmarks.md's SeaweedFS figures come from this command at full size."""

from __future__ import annotations

import pytest

from dataferry.bench.commit import CommitBenchSpec, run_commit_bench

pytestmark = pytest.mark.xdist_group("seaweedfs")


def test_bench_commit_on_s3_measures_the_copy_based_floor_on_the_server(
    seaweed, seaweed_url, monkeypatch
):
    """Beside the upload committers, the same number of server-side copies and deletes on the
    same server (what a rename committer's commit sends on S3): the goal's yardstick. Were
    no floor taken (as for a model), the run would print no ratio at all."""
    for name, value in seaweed.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    spec = CommitBenchSpec(
        committers=("magic",), files=12, tasks=3, partitions=2, store=seaweed_url, io_threads=4
    )
    data = run_commit_bench(spec).to_json()
    assert data["floor_on"].startswith(seaweed_url) and data["floor_s"] > 0
    assert data["floor_what"] == "copies and deletes"
    (magic,) = data["results"]
    assert magic["files"] == 12 and magic["limit_s"] == data["floor_s"]
    assert magic["ops"]["op_multipart_complete"] == 12
