from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dataferry
from dataferry.dataset.partition import NULL_PARTITION, escape_value
from dataferry.dataset.synthetic import sales_table
from dataferry.engine import LocalEngineConfig
from dataferry.errors import ConfigError, DestinationError

INLINE = LocalEngineConfig(workers=0)


def read_back(path, fmt="parquet"):
    return pads.dataset(str(path), format=fmt, partitioning="hive").to_table()


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_partitioned_write_reads_back_with_pyarrow(tmp_path, fmt):
    table = sales_table(5000, days=3)
    result = dataferry.write_dataset(
        table,
        str(tmp_path / "out"),
        partition_by=["day", "region"],
        format=fmt,
        committer="v1",
        engine=INLINE,
        tasks=4,
    )
    assert result.rows == 5000 and result.partitions == 15
    back = read_back(tmp_path / "out", fmt)
    assert back.num_rows == 5000
    assert sorted(back.column("order_id").to_pylist()) == list(range(5000))
    got = back.group_by(["day", "region"]).aggregate([("amount", "sum")]).sort_by("day")
    want = table.group_by(["day", "region"]).aggregate([("amount", "sum")]).sort_by("day")
    assert got.num_rows == want.num_rows
    names = [p.rsplit("/", 1)[-1] for p in result.run.commit.filenames]
    assert all(n.startswith("part-0000") and n.endswith(f".c000.{fmt}") for n in names)


def test_json_lines(tmp_path):
    table = pa.table({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    dataferry.write_dataset(
        table,
        str(tmp_path / "j"),
        partition_by=["k"],
        format="json",
        committer="v1",
        engine=INLINE,
        tasks=1,
    )
    rows = [
        json.loads(line)
        for line in (tmp_path / "j" / "k=a").glob("*.json").__next__().read_text().splitlines()
    ]
    assert rows == [{"v": 1}, {"v": 3}]


def test_escaping_and_nulls_survive_a_round_trip(tmp_path):
    table = pa.table({"cat": ["a/b", "x=y", None, "100%", "plain"], "v": np.arange(5)})
    dataferry.write_dataset(
        table, str(tmp_path / "e"), partition_by=["cat"], committer="v1", engine=INLINE, tasks=2
    )
    back = read_back(tmp_path / "e")
    assert sorted(back.column("cat").to_pylist(), key=str) == sorted(
        table.column("cat").to_pylist(), key=str
    )
    assert escape_value(None) == NULL_PARTITION and escape_value("a/b") == "a%2Fb"


def test_small_batches_are_merged_into_one_file(tmp_path):
    batches = [pa.record_batch({"x": [i, i + 1]}) for i in range(0, 6, 2)]
    r = dataferry.write_dataset(batches, str(tmp_path / "b"), committer="v1", engine=INLINE)
    assert r.run.attempts == 1 and r.files == 1
    assert read_back(tmp_path / "b").num_rows == 6


def test_modes(tmp_path):
    dest = str(tmp_path / "m")
    t = pa.table({"x": [1, 2]})
    dataferry.write_dataset(t, dest, committer="v1", engine=INLINE, tasks=1)
    with pytest.raises(DestinationError, match="not empty"):
        dataferry.write_dataset(t, dest, committer="v1", engine=INLINE, tasks=1)
    assert read_back(dest).num_rows == 2  # nothing already committed is lost
    dataferry.write_dataset(t, dest, mode="append", committer="v1", engine=INLINE, tasks=1)
    assert read_back(dest).num_rows == 4
    dataferry.write_dataset(t, dest, mode="overwrite", committer="v1", engine=INLINE, tasks=1)
    assert read_back(dest).num_rows == 2


def test_bad_input_is_named(tmp_path):
    t = pa.table({"x": [1]})
    with pytest.raises(ConfigError, match="unknown format 'avro'"):
        dataferry.write_dataset(t, str(tmp_path / "a"), format="avro")
    with pytest.raises(ConfigError, match="partition column 'nope'"):
        dataferry.write_dataset(
            t, str(tmp_path / "b"), partition_by=["nope"], committer="v1", engine=INLINE
        )
    with pytest.raises(ConfigError, match="must be a pyarrow Table"):
        dataferry.write_dataset("not a table", str(tmp_path / "c"))
    with pytest.raises(ConfigError, match="unknown committer"):
        dataferry.write_dataset(t, str(tmp_path / "d"), committer="fast")


def test_default_engine_process_pool_with_auto_committer(tmp_path):
    table = sales_table(20_000)
    r = dataferry.write_dataset(table, str(tmp_path / "auto"), partition_by=["day"], tasks=4)
    assert r.committer in {"v1", "manifest"}
    assert read_back(tmp_path / "auto").num_rows == 20_000
