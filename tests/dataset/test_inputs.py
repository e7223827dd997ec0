"""Every input a PyData user hands to write_dataset lands as the same rows."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dataferry
from dataferry.dataset.inputs import as_source
from dataferry.errors import ConfigError

ROWS = {"k": ["a", "b", "a", "c"] * 25, "v": list(range(100))}


def read_rows(path) -> list[tuple[str, int]]:
    t = pads.dataset(str(path), format="parquet", partitioning="hive").to_table()
    return sorted(zip(t.column("k").to_pylist(), t.column("v").to_pylist(), strict=True))


WANT = sorted(zip(ROWS["k"], ROWS["v"], strict=True))


def _dataset(tmp_path):
    src = tmp_path / "src"
    pads.write_dataset(
        pa.table(ROWS), str(src), format="parquet", max_rows_per_file=30, max_rows_per_group=30
    )
    return pads.dataset(str(src), format="parquet")


class _CStreamOnly:
    """An object known only by the Arrow C stream interface (as DuckDB relations are)."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self._table.__arrow_c_stream__(requested_schema)


INPUTS = {
    "table": lambda tmp: pa.table(ROWS),
    "record_batch": lambda tmp: pa.record_batch(ROWS),
    "reader": lambda tmp: pa.RecordBatchReader.from_batches(
        pa.table(ROWS).schema, pa.table(ROWS).to_batches(max_chunksize=7)
    ),
    "dataset": _dataset,
    "pandas": lambda tmp: pd.DataFrame(ROWS),
    "polars": lambda tmp: pl.DataFrame(ROWS),
    "polars_lazy": lambda tmp: pl.LazyFrame(ROWS).filter(pl.col("v") >= 0),
    "list_of_tables": lambda tmp: [pa.table(ROWS).slice(0, 40), pa.table(ROWS).slice(40)],
    "generator_of_pandas": lambda tmp: (
        pd.DataFrame(ROWS).iloc[i : i + 10] for i in range(0, 100, 10)
    ),
    "generator_of_polars": lambda tmp: (pl.DataFrame(ROWS).slice(i, 10) for i in range(0, 100, 10)),
    "c_stream": lambda tmp: _CStreamOnly(pa.table(ROWS)),
}


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_each_input_kind_writes_every_row_once(kind, tmp_path):
    data = INPUTS[kind](tmp_path)
    result = dataferry.write_dataset(data, str(tmp_path / "out"), partition_by=["k"])
    assert result.rows == 100 and result.partitions == 3
    assert read_rows(tmp_path / "out") == WANT


def test_streamed_kinds_are_streams_and_frames_are_tables(tmp_path):
    assert not as_source(pd.DataFrame(ROWS)).streamed
    assert not as_source(pl.DataFrame(ROWS)).streamed
    assert not as_source([pa.table(ROWS)]).streamed
    assert as_source(pl.LazyFrame(ROWS)).streamed
    assert as_source(_dataset(tmp_path)).streamed
    assert as_source(iter([pa.table(ROWS)])).streamed


def test_polars_frame_shares_its_buffers_with_arrow():
    df = pl.DataFrame({"v": list(range(1000))})
    before = pa.total_allocated_bytes()
    table = as_source(df).table
    assert table.num_rows == 1000
    assert pa.total_allocated_bytes() - before < 1000 * 8  # the column was not copied


def test_pandas_index_is_kept_unless_it_is_the_default(tmp_path):
    df = pd.DataFrame({"v": [1, 2, 3]}, index=pd.Index(["x", "y", "z"], name="key"))
    assert "key" in as_source(df).schema.names
    assert as_source(pd.DataFrame({"v": [1, 2, 3]})).schema.names == ["v"]


def test_bad_inputs_name_what_is_wrong():
    with pytest.raises(ConfigError, match="cannot write a str"):
        as_source("not data")
    with pytest.raises(ConfigError, match="data item 1 is a int"):
        as_source([pa.table(ROWS), 5])
    with pytest.raises(ConfigError, match="data is empty"):
        as_source([])
    with pytest.raises(ConfigError, match="data item 1 has schema"):
        as_source([pa.table({"a": [1]}), pa.table({"b": ["x"]})])


def test_a_later_stream_item_with_another_schema_fails_the_job_and_leaves_nothing(tmp_path):
    def items():
        yield pa.table({"k": ["a"], "v": [1]})
        yield pa.table({"k": ["a"], "w": ["oops"]})

    with pytest.raises(ConfigError, match="data item 1 has schema"):
        dataferry.write_dataset(items(), str(tmp_path / "out"), partition_by=["k"])
    left = (
        [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
        if (tmp_path / "out").exists()
        else []
    )
    assert left == []
