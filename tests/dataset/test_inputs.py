"""Every input a PyData user hands to write_dataset lands as the same rows."""

from __future__ import annotations

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
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


# --- pandas' and pyarrow's own ways of handing data over --------------------------------------

FRAME = {"k": ["b", "a", "b", "a"], "v": [1, 2, 3, 4]}
INDEXES = {
    "range_step": pd.RangeIndex(10, 18, 2),
    "range_named": pd.RangeIndex(0, 4, name="r"),
    "default": pd.RangeIndex(4),
    "named": pd.Index([9, 7, 5, 3], name="idx"),
    "unnamed_ints": pd.Index([9, 7, 5, 3]),
    "strings": pd.Index(["w", "x", "y", "z"]),
    "multi": pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1), ("c", 0)], names=["x", "y"]),
}


def _by_v(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["k"] = df["k"].astype(str)  # a partition column reads back as a categorical
    return df[sorted(df.columns)].sort_values("v")


@pytest.mark.parametrize(
    "index", [None, True, False], ids=["index_none", "index_true", "index_false"]
)
@pytest.mark.parametrize("kind", sorted(INDEXES))
def test_a_pandas_index_reads_back_as_pandas_own_write_keeps_it(tmp_path, kind, index):
    """RangeIndex of any step, named and MultiIndex, with each of pandas' `index=` values:
    pandas.read_parquet gives the frame pandas' own to_parquet gives (a RangeIndex(0, 4, 2)
    read back as 0, 1 would lose the user's row labels)."""
    df = pd.DataFrame(FRAME, index=INDEXES[kind])
    df.to_parquet(str(tmp_path / "pandas.parquet"), index=index)
    dataferry.write_dataset(df, str(tmp_path / "out"), index=index)
    want = pd.read_parquet(str(tmp_path / "pandas.parquet"))
    pd.testing.assert_frame_equal(_by_v(pd.read_parquet(str(tmp_path / "out"))), _by_v(want))


@pytest.mark.parametrize("kind", sorted(INDEXES))
def test_a_partitioned_pandas_index_keeps_each_rows_label(tmp_path, kind):
    """Partitioning reorders rows: every row reads back with its own index label (pandas'
    own partitioned write gives a stepped RangeIndex's labels to the wrong rows); the
    default RangeIndex (row numbers) stays metadata, as pandas keeps it."""
    df = pd.DataFrame(FRAME, index=INDEXES[kind])
    dataferry.write_dataset(df, str(tmp_path / "out"), partition_by=["k"])
    got = _by_v(pd.read_parquet(str(tmp_path / "out")))
    if kind == "default":
        assert "__index_level_0__" not in pq.read_schema(_first_file(tmp_path / "out")).names
        return
    pd.testing.assert_frame_equal(got, _by_v(df))


def _first_file(path) -> str:
    return str(next(p for p in sorted(path.rglob("*.parquet"))))


def test_index_and_preserve_index_are_one_choice(tmp_path):
    """pyarrow's preserve_index= is pandas' index=: either writes the index; both given
    differently is refused, naming both."""
    df = pd.DataFrame({"v": [1, 2]}, index=pd.Index(["x", "y"], name="key"))
    dataferry.write_dataset(df, str(tmp_path / "a"), preserve_index=False)
    assert pd.read_parquet(str(tmp_path / "a")).index.name is None
    dataferry.write_dataset(df, str(tmp_path / "b"), index=True)
    assert list(pd.read_parquet(str(tmp_path / "b")).index) == ["x", "y"]
    with pytest.raises(ConfigError, match="give index or preserve_index"):
        dataferry.write_dataset(df, str(tmp_path / "c"), index=True, preserve_index=False)


@pytest.mark.parametrize("name", ["x", None])
def test_a_pandas_series_is_the_one_column_frame_pandas_makes_of_it(tmp_path, name):
    """A Series is written as `series.to_frame()`: its name (or pandas' 0) is the column,
    its index kept as a frame's would be."""
    series = pd.Series([1.5, 2.5, None], name=name, index=pd.RangeIndex(5, 8))
    series.to_frame().to_parquet(str(tmp_path / "pandas.parquet"))
    dataferry.write_dataset(series, str(tmp_path / "out"))
    pd.testing.assert_frame_equal(
        pd.read_parquet(str(tmp_path / "out")), pd.read_parquet(str(tmp_path / "pandas.parquet"))
    )


def test_a_polars_series_is_a_one_column_frame(tmp_path):
    dataferry.write_dataset(pl.Series("s", [1, 2, 3]), str(tmp_path / "out"))
    assert pads.dataset(str(tmp_path / "out")).to_table().to_pydict() == {"s": [1, 2, 3]}


def test_a_dict_of_columns_is_what_pyarrow_table_makes_of_it(tmp_path):
    """A dict of lists (or arrays, or Series) is pyarrow.table(dict), with schema= too; one
    that pyarrow refuses is a ConfigError, not a raw Arrow error."""
    dataferry.write_dataset(ROWS, str(tmp_path / "out"), partition_by=["k"])
    assert read_rows(tmp_path / "out") == WANT
    schema = pa.schema([("k", pa.string()), ("v", pa.int16())])
    dataferry.write_dataset(ROWS, str(tmp_path / "typed"), schema=schema)
    assert pads.dataset(str(tmp_path / "typed")).schema.field("v").type == pa.int16()
    with pytest.raises(ConfigError, match="dict of columns"):
        as_source({"a": [1, 2], "b": [1]})


def test_schema_converts_pandas_and_casts_arrow_and_streams(tmp_path):
    """schema= is what from_pandas converts to and what Arrow data and streams are cast to;
    a column that cannot be cast is named before anything is written."""
    schema = pa.schema([("k", pa.large_string()), ("v", pa.int32())])
    for name, data in {
        "pandas": pd.DataFrame(ROWS),
        "arrow": pa.table(ROWS),
        "stream": iter([pa.table(ROWS)]),
        "reader": pa.table(ROWS).to_reader(),
    }.items():
        dataferry.write_dataset(data, str(tmp_path / name), schema=schema)
        got = pq.read_schema(_first_file(tmp_path / name))
        assert got.field("v").type == pa.int32() and got.field("k").type == pa.large_string()
        assert read_rows(tmp_path / name) == WANT
    bad = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    with pytest.raises(ConfigError, match="column 'k' is string and does not cast to int64"):
        dataferry.write_dataset(pa.table(ROWS), str(tmp_path / "bad"), schema=bad)
    with pytest.raises(ConfigError, match="column 'k' is string and does not cast to int64"):
        dataferry.write_dataset(pa.table(ROWS).to_reader(), str(tmp_path / "bad2"), schema=bad)
    assert not (tmp_path / "bad").exists() or not list((tmp_path / "bad").rglob("*.parquet"))


def test_a_stepped_range_index_over_many_files_labels_every_row(tmp_path):
    """Unpartitioned files keep the rows' order (task and file names sort as the rows), so
    the RangeIndex kept as metadata labels each row rightly across several files."""
    df = pd.DataFrame({"v": range(30)}, index=pd.RangeIndex(100, 160, 2))
    result = dataferry.write_dataset(df, str(tmp_path / "out"), tasks=3)
    assert result.files == 3
    pd.testing.assert_frame_equal(pd.read_parquet(str(tmp_path / "out")), df)
