"""Writes from Ray Data through CommitDatasink on a local Ray (num_cpus=2)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

ray = pytest.importorskip("ray")

from dataferry.engine import AttemptFailure  # noqa: E402
from dataferry.ray import CommitDatasink  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def table(n=10_000):
    return pa.table({"id": np.arange(n), "day": [f"d{i % 3}" for i in range(n)]})


@pytest.mark.parametrize("committer", ["manifest", "direct"])
def test_a_task_that_fails_once_is_retried_and_output_is_exact(local_ray, tmp_path, committer):
    t = table()
    sink = CommitDatasink(
        str(tmp_path / "out"),
        partition_by=["day"],
        committer=committer,
        failures=[AttemptFailure(1, 0, "after_write")],
    )
    ray.data.from_arrow(t).repartition(4).write_datasink(
        sink, ray_remote_args={"max_retries": 3, "retry_exceptions": True}
    )
    back = pads.dataset(str(tmp_path / "out"), partitioning="hive").to_table()
    assert sorted(back.column("id").to_pylist()) == list(range(t.num_rows))
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert not (tmp_path / "out" / "_temporary").exists()
    assert sink.result.committer == committer


def test_a_failed_write_is_aborted(local_ray, tmp_path):
    sink = CommitDatasink(
        str(tmp_path / "out"),
        partition_by=["day"],
        failures=[AttemptFailure(0, a, "after_write") for a in range(5)],
    )
    with pytest.raises(Exception, match="injected failure"):
        ray.data.from_arrow(table(1000)).repartition(2).write_datasink(
            sink, ray_remote_args={"max_retries": 1, "retry_exceptions": True}
        )
    leftovers = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert leftovers == []  # nothing half-written survives the abort
