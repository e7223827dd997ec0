"""Ray's `DeltaDatasink` takes deltalake's arguments as `dataferry.write_deltalake` does: an
append without partition columns takes the table's, and deltalake's CommitProperties land in
the commit."""

from __future__ import annotations

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")
pytest.importorskip("ray")

from dataferry.ray import DeltaDatasink  # noqa: E402


def test_a_ray_append_takes_the_tables_partitioning_and_commit_properties(local_ray, tmp_path):
    """Broken: "partitioned by ['day']; the write gives partition_by=[]", and
    commit_properties refused as an unknown writer option."""
    out = tmp_path / "t"
    first = pa.table({"id": [0, 1, 2, 3], "day": ["d0", "d1", "d0", "d1"]})
    deltalake.write_deltalake(str(out), first, partition_by=["day"])
    more = pa.table({"id": [10, 11], "day": ["d0", "d2"]})
    props = deltalake.CommitProperties(custom_metadata={"from": "ray"})
    sink = DeltaDatasink(str(out), mode="append", commit_properties=props)
    local_ray.data.from_arrow(more).write_datasink(sink)
    table = deltalake.DeltaTable(str(out))
    assert table.metadata().partition_columns == ["day"]
    assert table.history(1)[0]["from"] == "ray"
    assert sorted(pl.read_delta(str(out))["id"].to_list()) == [0, 1, 2, 3, 10, 11]
    assert all(p.parent.name.startswith("day=") for p in out.rglob("*.parquet"))
