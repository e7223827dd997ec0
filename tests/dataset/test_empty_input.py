"""Data without rows writes one file holding its schema, as pandas writes an empty frame, so
every reader of the data set finds its columns (an empty data set, not a missing one)."""

from __future__ import annotations

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dataferry

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64()), ("ts", pa.timestamp("ns"))])
EMPTY = SCHEMA.empty_table()


def columns_every_reader_finds(path) -> dict[str, tuple[int, list[str]]]:
    glob = f"{path}/**/*.parquet"
    pa_table = pads.dataset(str(path), format="parquet", partitioning="hive").to_table()
    frame = pd.read_parquet(str(path))
    polars_frame = pl.read_parquet(glob, hive_partitioning=True)
    duck = duckdb.sql(f"select * from read_parquet('{glob}', hive_partitioning=true)")
    duck_table = duck.to_arrow_table()
    return {
        "pyarrow": (pa_table.num_rows, pa_table.column_names),
        "pandas": (len(frame), list(frame.columns)),
        "polars": (polars_frame.height, polars_frame.columns),
        "duckdb": (duck_table.num_rows, duck_table.column_names),
    }


INPUTS = {
    "arrow": lambda: EMPTY,
    "pandas": lambda: EMPTY.to_pandas(),
    "polars": lambda: pl.from_arrow(EMPTY),
    "reader": lambda: pa.RecordBatchReader.from_batches(SCHEMA, iter(())),
    "iterator_with_schema": lambda: iter(()),
    "list_with_schema": lambda: [],
}


@pytest.mark.parametrize("partition_by", [None, ["k"]], ids=["flat", "partitioned"])
@pytest.mark.parametrize("committer", ["auto", "v1", "v2", "manifest", "direct"])
@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_an_empty_input_gives_every_reader_its_columns(tmp_path, kind, committer, partition_by):
    """An empty frame, table, stream or iterator (with schema=) commits one file of its
    schema at the root (a partitioned one too: no partition holds a row, and pyarrow cannot
    type a partition column from a null directory): pyarrow.dataset, pandas, polars and
    DuckDB read the columns and 0 rows. Without the file, they find no data set at all."""
    schema = SCHEMA if kind.endswith("with_schema") else None
    out = tmp_path / "out"
    result = dataferry.write_dataset(
        INPUTS[kind](), str(out), partition_by=partition_by, committer=committer, schema=schema
    )
    assert result.rows == 0 and result.files == 1
    files = sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    assert len(files) == 1 and len(files[0].parts) == 1  # at the root
    for reader, found in columns_every_reader_finds(out).items():
        assert found == (0, SCHEMA.names), reader
    assert pads.dataset(str(out)).schema.field("ts").type == pa.timestamp("ns")


def test_an_empty_append_to_a_data_set_adds_no_file(tmp_path):
    """Appending no rows to a data set that is there writes nothing (its files hold the
    schema already; a file at the root of a partitioned set would change its layout)."""
    out = tmp_path / "out"
    dataferry.write_dataset(pa.table({"k": ["a"], "v": [1]}), str(out), partition_by=["k"])
    before = sorted(out.rglob("*.parquet"))
    empty = pa.schema([("k", pa.string()), ("v", pa.int64())]).empty_table()
    result = dataferry.write_dataset(empty, str(out), partition_by=["k"], mode="append")
    assert result.files == 0 and sorted(out.rglob("*.parquet")) == before
    assert columns_every_reader_finds(out)["duckdb"] == (1, ["v", "k"])


def test_an_empty_append_to_an_empty_destination_writes_the_schema(tmp_path):
    result = dataferry.write_dataset(EMPTY, str(tmp_path / "out"), mode="append")
    assert result.files == 1


def test_an_empty_overwrite_replaces_the_data_with_the_schema(tmp_path):
    """mode='overwrite' with no rows leaves an empty data set of the new schema, as pandas'
    to_parquet of an empty frame over a file does."""
    out = tmp_path / "out"
    dataferry.write_dataset(pa.table({"x": [1, 2]}), str(out))
    dataferry.write_dataset(EMPTY, str(out), mode="overwrite")
    assert columns_every_reader_finds(out)["pyarrow"] == (0, SCHEMA.names)


def test_an_empty_partition_overwrite_touches_nothing(tmp_path):
    """overwrite-partitions (pyarrow's delete_matching) with no rows writes into no
    partition, so it replaces none and adds no file."""
    out = tmp_path / "out"
    dataferry.write_dataset(pa.table({"k": ["a"], "v": [1]}), str(out), partition_by=["k"])
    empty = pa.schema([("k", pa.string()), ("v", pa.int64())]).empty_table()
    dataferry.write_dataset(empty, str(out), partition_by=["k"], mode="overwrite-partitions")
    assert columns_every_reader_finds(out)["pyarrow"] == (1, ["v", "k"])


def test_an_empty_dask_frame_writes_the_schema_as_dask_does(tmp_path):
    """dataferry.dask.to_parquet of a frame without rows writes one file of its schema (Dask
    writes a file per partition, empty ones too); partitioned, nothing, as Dask."""
    dd = pytest.importorskip("dask.dataframe")
    import dataferry.dask as dfdask

    frame = dd.from_pandas(EMPTY.to_pandas(), npartitions=1)
    sync = {"scheduler": "sync"}
    result = dfdask.to_parquet(frame, str(tmp_path / "flat"), compute_kwargs=sync)
    assert result.files == 1
    assert columns_every_reader_finds(tmp_path / "flat")["duckdb"] == (0, SCHEMA.names)
    result = dfdask.to_parquet(
        frame, str(tmp_path / "part"), partition_on=["k"], compute_kwargs=sync
    )
    assert result.files == 0
