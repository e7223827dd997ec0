"""The Iceberg type policy on the type zoo: what pandas and polars hand over by default, written
by the Iceberg committer and read back by pyiceberg's scan and `polars.scan_iceberg`, gives
the values pyiceberg's own append gives for the same frame (with its
`downcast-ns-timestamp-to-us-on-write`); the data files hold the table's types."""

from __future__ import annotations

import math
import re
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.iceberg.types import arrow_types, plain
from dataferry.errors import ConfigError
from dataferry.store import open_store
from dataferry.verify.type_zoo import PARTITION, type_zoo, type_zoo_pandas

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

# pyiceberg refuses a zone other than UTC; the committer keeps its instants as timestamptz
ZONED = "ts_tz"


def table_of(dest):
    return committer_by_name("iceberg", open_store(str(dest))).table()


def pyiceberg_table(tmp_path, frame: pa.Table, monkeypatch):
    """The same frame appended twice by pyiceberg itself (downcasting nanoseconds)."""
    from pyiceberg.catalog.sql import SqlCatalog

    monkeypatch.setenv("PYICEBERG_DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE", "true")
    where = tmp_path / "pyiceberg"
    where.mkdir()
    catalog = SqlCatalog("ref", uri=f"sqlite:///{where}/c.db", warehouse=f"file://{where}")
    catalog.create_namespace("n")
    theirs = frame.drop_columns([ZONED])
    tbl = catalog.create_table("n.zoo", schema=theirs.schema)
    tbl.append(theirs)
    tbl.append(theirs)
    return catalog.load_table("n.zoo")


def values(table: pa.Table) -> dict[str, list]:
    """Each column's values in id order, NaN made comparable."""
    table = table.sort_by([("id", "ascending")])

    def comparable(v):
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    return {n: [comparable(v) for v in table.column(n).to_pylist()] for n in table.column_names}


def polars_arrow(tbl) -> pa.Table:
    import polars as pl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pl.scan_iceberg(tbl).collect().to_arrow()


def instants(column) -> list:
    return column.cast(pa.timestamp("us", "UTC")).to_pylist()


@pytest.mark.parametrize("partition_by", [[PARTITION], []], ids=["partitioned", "flat"])
def test_the_type_zoo_reads_back_as_pyiceberg_writes_it(tmp_path, monkeypatch, partition_by):
    """Broken (the data's own types in the files), readers find nanoseconds and unsigned
    values under microsecond and signed columns (polars fails or misreads), or the table
    cannot be created at all."""
    frame = type_zoo()
    dest = tmp_path / "t"
    for mode in ("append", "append"):  # the second goes into the table the first made
        dataferry.write_dataset(
            frame, str(dest), committer="iceberg", partition_by=partition_by, mode=mode
        )
    ours = table_of(dest)
    theirs = pyiceberg_table(tmp_path, frame, monkeypatch)

    expected = values(theirs.scan().to_arrow())
    twice = pa.concat_tables([frame, frame])
    for reader, got in (
        ("pyiceberg", ours.scan().to_arrow()),
        ("polars", polars_arrow(ours)),
    ):
        got_values = values(got)
        for column, want in expected.items():
            assert got_values[column] == want, (reader, column)
        order = pa.concat_tables([frame, frame]).sort_by([("id", "ascending")])
        assert instants(got.sort_by([("id", "ascending")]).column(ZONED)) == instants(
            order.column(ZONED)
        ), reader
    assert got.num_rows == twice.num_rows

    # the table's types are pyiceberg's (timestamptz for the zoned column)
    # (but uint32: pyiceberg makes it an int, which cannot hold its upper half; a long can)
    for f in theirs.schema().as_struct().fields:
        want = "long" if f.name == "u32" else str(f.field_type)
        got = re.sub(r"\d+: ", "", str(ours.schema().find_field(f.name).field_type))
        assert got == re.sub(r"\d+: ", "", want), f.name
    assert str(ours.schema().find_field(ZONED).field_type) == "timestamptz"

    # every data file holds the table's types: no nanoseconds, no unsigned, no dictionary
    table_types = arrow_types(ours.schema())
    for path in (dest / "data").rglob("*.parquet"):
        for f in pq.read_schema(path):
            assert plain(f.type) == table_types[f.name], (path.name, f.name, f.type)


def test_the_pandas_zoo_reads_back_as_pyiceberg_writes_it(tmp_path, monkeypatch):
    """The zoo as a pandas 2 frame (nanoseconds, categoricals, numpy unsigned integers).
    Broken, the first write of a user's DataFrame fails or jams the table."""
    frame = type_zoo_pandas().drop(
        columns=["mp"]
    )  # pandas holds a map as tuples it can't give back
    dest = tmp_path / "t"
    dataferry.write_dataset(frame, str(dest), committer="iceberg")
    dataferry.write_dataset(frame, str(dest), committer="iceberg", mode="append")
    arrow = pa.Table.from_pandas(frame, preserve_index=False)
    theirs = pyiceberg_table(tmp_path, arrow, monkeypatch)
    expected = values(theirs.scan().to_arrow())
    ours = table_of(dest)
    for got in (ours.scan().to_arrow(), polars_arrow(ours)):
        got_values = values(got)
        for column, want in expected.items():
            assert got_values[column] == want, column


def test_a_uint64_past_the_long_range_fails_the_job_and_commits_nothing(tmp_path):
    """pyiceberg makes uint64 a long; a value past 2**63-1 has no long. Broken (a wrapping
    cast), the table holds a negative number the user never wrote."""
    dest = tmp_path / "t"
    big = pa.table({"id": [1, 2], "u": pa.array([1, 2**63 + 5], pa.uint64())})
    with pytest.raises(Exception, match=r"(?i)overflow|out of bounds|integer value"):
        dataferry.write_dataset(big, str(dest), committer="iceberg")
    assert table_of(dest) is None
    assert not list((dest / "data").rglob("*.parquet")) if (dest / "data").exists() else True


def test_a_column_of_another_type_than_the_table_s_is_refused_naming_it(tmp_path):
    """Broken, a string column goes into a long column's files and readers fail."""
    dest = tmp_path / "t"
    dataferry.write_dataset(pa.table({"id": [1], "x": [1]}), str(dest), committer="iceberg")
    with pytest.raises(ConfigError, match="column 'x' is string in the data"):
        dataferry.write_dataset(
            pa.table({"id": [2], "x": ["a"]}), str(dest), committer="iceberg", mode="append"
        )


def test_the_zoo_appends_to_a_table_pyiceberg_made_from_it(tmp_path, monkeypatch):
    """pyiceberg's own table of the zoo (uint32 as an int column) takes dataferry's append of
    the same frame, read back as pyiceberg's own second append. Broken, the append is
    refused, or its files hold other types than the table's."""
    # without the categorical: pyiceberg's files keep a dictionary column as one, dataferry's
    # hold the table's string, and pyiceberg's scan cannot concatenate the two (its own
    # appends of a categorical and a plain frame fail its scan alike)
    frame = type_zoo().drop_columns(["cat"])
    theirs = pyiceberg_table(tmp_path, frame, monkeypatch)  # appended twice by pyiceberg
    location = theirs.metadata.location.removeprefix("file://")
    catalog = {"name": "ref", "type": "sql", "uri": f"sqlite:///{tmp_path}/pyiceberg/c.db"}
    options = {"catalog": catalog, "identifier": "n.zoo"}
    ours = frame.drop_columns([ZONED])
    dataferry.write_dataset(
        ours, location, committer="iceberg", mode="append", committer_options=options
    )
    from pyiceberg.catalog import load_catalog

    tbl = load_catalog(**catalog).load_table("n.zoo")
    assert str(tbl.schema().find_field("u32").field_type) == "int"
    got = values(tbl.scan().to_arrow())
    twice = values(theirs.scan().to_arrow())  # each row twice, side by side in id order
    for column in got:
        want = twice[column] + twice[column][::2]  # and once more: dataferry's append
        assert sorted(map(repr, got[column])) == sorted(map(repr, want)), column
    # (polars.scan_iceberg cannot read this table: pyiceberg's own files hold uint32 under
    # the int column; dataferry's hold int32, `test_the_type_zoo_reads_back_...` reads them)

    too_big = ours.slice(0, 1).set_column(
        ours.column_names.index("u32"), "u32", pa.array([2**31 + 1], pa.uint32())
    )
    with pytest.raises(Exception, match=r"(?i)overflow|out of bounds|integer value"):
        dataferry.write_dataset(
            too_big, location, committer="iceberg", mode="append", committer_options=options
        )
    assert load_catalog(**catalog).load_table("n.zoo").scan().to_arrow().num_rows == 24


def test_a_dask_frame_of_pandas_types_makes_and_appends_to_a_table(tmp_path):
    """`dataferry.dask.to_parquet` with a frame of pandas' defaults (nanoseconds, a zoned
    column, numpy unsigned, a categorical), then int32 ids into the long column. Broken, the
    first write jams the table or the tasks' files hold types the table does not have (the
    tasks rebuild the committer from the job's config, which must carry the table's types)."""
    import numpy as np
    import pandas as pd

    dd = pytest.importorskip("dask.dataframe")
    import dataferry.dask as fdask

    hours = pd.date_range("2024-03-30 22:00", periods=6, freq="h")
    pdf = pd.DataFrame(
        {
            "id": np.arange(6),
            "ts": hours.astype("datetime64[ns]"),
            "tz": hours.tz_localize("UTC")
            .tz_convert("Europe/Paris")
            .astype("datetime64[ns, Europe/Paris]"),
            "u": np.arange(6, dtype="uint16"),
            "cat": pd.Categorical(list("abcabc")),
        }
    )
    dest = tmp_path / "t"
    fdask.to_parquet(dd.from_pandas(pdf, npartitions=2), str(dest), committer="iceberg")
    later = pdf.assign(id=(pdf["id"] + 6).astype("int32"))
    fdask.to_parquet(
        dd.from_pandas(later, npartitions=2), str(dest), committer="iceberg", append=True
    )
    tbl = table_of(dest)
    got = tbl.scan().to_arrow().sort_by("id")
    assert got["id"].to_pylist() == list(range(12))
    assert got["ts"].to_pylist() == [t.to_pydatetime() for t in hours] * 2
    assert instants(got["tz"]) == instants(pa.array(hours.tz_localize("UTC"))) * 2
    assert polars_arrow(tbl).num_rows == 12
    table_types = arrow_types(tbl.schema())
    for path in (dest / "data").rglob("*.parquet"):
        for f in pq.read_schema(path):
            assert plain(f.type) == table_types[f.name], (path.name, f.name, f.type)


def test_times_and_fixed_size_lists_become_iceberg_s_time_and_list(tmp_path):
    """A time32 column (seconds or milliseconds) and a fixed-size list: Iceberg has a time in
    microseconds and lists. Broken, the write is refused or its files hold other types."""
    import datetime as dt

    dest = tmp_path / "t"
    data = pa.table(
        {
            "id": [1, 2],
            "at": pa.array([dt.time(9, 30, 1), dt.time(23, 59, 59)], pa.time32("s")),
            "pair": pa.array([[1, 2], [3, 4]], pa.list_(pa.int64(), 2)),
        }
    )
    dataferry.write_dataset(data, str(dest), committer="iceberg")
    tbl = table_of(dest)
    assert str(tbl.schema().find_field("at").field_type) == "time"
    got = tbl.scan().to_arrow().sort_by("id")
    assert got["at"].to_pylist() == [dt.time(9, 30, 1), dt.time(23, 59, 59)]
    assert got["pair"].to_pylist() == [[1, 2], [3, 4]]
    assert polars_arrow(tbl).num_rows == 2
