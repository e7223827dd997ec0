"""The type zoo written to a plain directory reads back, through every reader of plain data
sets, exactly as what pandas and pyarrow's own writers write from the same frame."""

from __future__ import annotations

import duckdb
import pandas as pd
import polars as pl
import polars.testing
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.errors import ConfigError
from dataferry.verify.type_zoo import PARTITION, type_zoo, type_zoo_pandas


def _glob(path) -> str:
    return f"{path}/**/*.parquet"


def read_pyarrow(path, hive: bool) -> pa.Table:
    table = pads.dataset(str(path), format="parquet", partitioning="hive" if hive else None)
    return table.to_table().sort_by("id")


def read_pandas(path, hive: bool) -> pd.DataFrame:
    return pd.read_parquet(str(path)).sort_values("id").reset_index(drop=True)


def read_polars(path, hive: bool) -> pl.DataFrame:
    return pl.read_parquet(_glob(path), hive_partitioning=hive).sort("id")


def read_duckdb(path, hive: bool) -> list:
    sql = f"select * from read_parquet('{_glob(path)}', hive_partitioning={str(hive).lower()})"
    relation = duckdb.sql(sql + " order by id")
    return [relation.columns, [str(t) for t in relation.types], relation.fetchall()]


def same(reader: str, got, want) -> None:
    if reader == "pyarrow":
        assert got.schema.equals(want.schema, check_metadata=False), (got.schema, want.schema)
        for name in want.column_names:  # NaN is not equal to itself: compared by its text
            assert repr(got.column(name).to_pylist()) == repr(want.column(name).to_pylist()), name
    elif reader == "pandas":
        pd.testing.assert_frame_equal(got, want)
    elif reader == "polars":
        polars.testing.assert_frame_equal(got, want)
    else:
        assert repr(got) == repr(want)  # NaN compares by its text


READERS = {
    "pyarrow": read_pyarrow,
    "pandas": read_pandas,
    "polars": read_polars,
    "duckdb": read_duckdb,
}


def reference(tmp_path, frame, hive: bool):
    """The frame as the library's own writer writes it (pandas' to_parquet for a pandas
    frame, pyarrow's write_table / write_to_dataset for Arrow)."""
    path = tmp_path / "reference"
    if isinstance(frame, pd.DataFrame):
        path.mkdir()
        frame.to_parquet(
            str(path) if hive else str(path / "data.parquet"),
            partition_cols=[PARTITION] if hive else None,
        )
    elif hive:
        pq.write_to_dataset(frame, str(path), partition_cols=[PARTITION])
    else:
        path.mkdir()
        pq.write_table(frame, str(path / "data.parquet"))
    return path


def zoo(kind: str):
    if kind == "arrow":
        return type_zoo()
    # pandas cannot write the map column it reads back (a list of tuples): not a pandas value
    return type_zoo_pandas().drop(columns=["mp"])


@pytest.mark.parametrize("committer", ["auto", "manifest"])
@pytest.mark.parametrize("hive", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("kind", ["arrow", "pandas"])
def test_the_type_zoo_reads_back_as_the_own_writer_writes_it(tmp_path, kind, hive, committer):
    """Every type pandas 2/3, numpy and polars produce by default (nanosecond and zoned
    timestamps, unsigned integers, categoricals, large strings, decimals, nested values,
    nulls, empty strings) comes back from each reader as it does from the frame written by
    pandas or pyarrow itself; a value dataferry wrote otherwise would differ here."""
    frame = zoo(kind)
    want_path = reference(tmp_path, frame, hive)
    out = tmp_path / "out"
    dataferry.write_dataset(
        frame, str(out), partition_by=[PARTITION] if hive else None, committer=committer, tasks=2
    )
    for name, read in READERS.items():
        same(name, read(out, hive), read(want_path, hive))


def test_a_pandas_column_pyarrow_cannot_convert_is_named():
    """The zoo's map column, as pandas holds it (lists of tuples), converts as pandas'
    to_parquet fails to: the error names the column."""
    with pytest.raises(ConfigError, match="column mp"):
        dataferry.write_dataset(type_zoo_pandas(), "memory://zoo-map")


@pytest.mark.parametrize("kind", ["arrow", "pandas"])
def test_the_empty_type_zoo_gives_every_reader_the_own_writers_types(tmp_path, kind):
    """No rows of the zoo: the one schema file gives each reader the column types pandas'
    or pyarrow's own write of the empty frame gives (no reader falls back to null or
    string columns)."""
    frame = zoo(kind)
    empty = frame.iloc[:0] if kind == "pandas" else frame.slice(0, 0)
    want_path = reference(tmp_path, empty, hive=False)
    dataferry.write_dataset(empty, str(tmp_path / "out"))
    for name, read in READERS.items():
        same(name, read(tmp_path / "out", False), read(want_path, False))
