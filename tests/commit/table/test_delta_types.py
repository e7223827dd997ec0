"""The Delta committer's type policy: the type zoo (what pandas, numpy and polars hand over by
default, and the edge cases) written by dataferry reads back through deltalake, polars and
pandas exactly as the same frame written by `deltalake.write_deltalake` does; values Delta
cannot hold are refused naming the column, before anything is committed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.errors import ConfigError, DataferryError, TaskFailed
from dataferry.verify.type_zoo import PARTITION, type_zoo, type_zoo_pandas

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")


def log_entries(path: Path, version: int = 0) -> list[dict]:
    return [json.loads(line) for line in (path / "_delta_log" / f"{version:020d}.json").open()]


def log_schema_and_protocol(path: Path) -> tuple[dict, dict]:
    entries = log_entries(path)
    meta = next(e["metaData"] for e in entries if "metaData" in e)
    return json.loads(meta["schemaString"]), next(e["protocol"] for e in entries if "protocol" in e)


def same_rows(got: pa.Table, want: pa.Table) -> None:
    """Same schema and values (NaN equal to NaN: compared by their repr)."""
    assert got.schema.equals(want.schema), (got.schema, want.schema)
    assert repr(got.to_pylist()) == repr(want.to_pylist())


def read_all_ways(path: Path) -> tuple[pa.Table, object, object]:
    table = deltalake.DeltaTable(str(path))
    return (
        table.to_pyarrow_table().sort_by("id"),
        pl.read_delta(str(path)).sort("id"),
        table.to_pandas().sort_values("id").reset_index(drop=True),
    )


def assert_reads_as_deltalakes(ours: Path, theirs: Path) -> None:
    """deltalake, polars and pandas read our table as they read deltalake's; the log records
    the same schema and protocol."""
    assert log_schema_and_protocol(ours) == log_schema_and_protocol(theirs)
    (a, pa_, pd_), (b, pb, pdb) = read_all_ways(ours), read_all_ways(theirs)
    same_rows(a, b)
    assert pa_.schema == pb.schema and pa_.equals(pb)
    assert list(pd_.dtypes) == list(pdb.dtypes)
    assert repr(pd_.to_dict("records")) == repr(pdb.to_dict("records"))


def write_ours(how: str, data, dest: Path, parts) -> None:
    if how == "write_dataset":
        dataferry.write_dataset(data, str(dest), committer="delta", partition_by=parts)
    else:
        dataferry.write_deltalake(str(dest), data, partition_by=parts)


@pytest.mark.parametrize("parts", [None, [PARTITION]], ids=["flat", "partitioned"])
@pytest.mark.parametrize("how", ["write_dataset", "write_deltalake"])
def test_the_type_zoo_reads_back_as_deltalake_writes_it(tmp_path, how, parts):
    """Nanosecond, zoned and UTC timestamps, unsigned integers, categoricals, large strings,
    decimals, nested values, nulls and empty strings. Broken, a pandas frame with a
    nanosecond column makes a table deltalake and polars refuse to read (timestampNanos), and
    unsigned columns make polars raise SchemaError."""
    zoo = type_zoo()
    write_ours(how, zoo, tmp_path / "ours", parts)
    deltalake.write_deltalake(str(tmp_path / "theirs"), zoo, partition_by=parts)
    assert_reads_as_deltalakes(tmp_path / "ours", tmp_path / "theirs")


@pytest.mark.parametrize("how", ["write_dataset", "write_deltalake"])
def test_the_pandas_type_zoo_reads_back_as_deltalake_writes_it(tmp_path, how):
    """The zoo as a pandas frame (datetime64[ns], a zoned column, numpy unsigned integers,
    categoricals). Its map column is left out: pyarrow cannot convert it from pandas objects,
    for deltalake as for dataferry."""
    frame = type_zoo_pandas().drop(columns=["mp"])
    write_ours(how, frame, tmp_path / "ours", [PARTITION])
    deltalake.write_deltalake(str(tmp_path / "theirs"), frame, partition_by=[PARTITION])
    assert_reads_as_deltalakes(tmp_path / "ours", tmp_path / "theirs")


def test_the_files_hold_the_types_the_log_records(tmp_path):
    """Each data file's own schema is the log's (as deltalake's files are): microseconds,
    UTC, signed integers. Broken, a reader that trusts the file (polars) sees other types
    than the log promises."""
    dataferry.write_dataset(type_zoo(), str(tmp_path / "t"), committer="delta")
    deltalake.write_deltalake(str(tmp_path / "d"), type_zoo())
    ours = pq.read_schema(next((tmp_path / "t").glob("*.parquet")))
    theirs = pq.read_schema(next((tmp_path / "d").glob("*.parquet")))
    assert ours.types == theirs.types
    assert ours.field("ts_ns").type == pa.timestamp("us")
    assert ours.field("ts_tz").type == pa.timestamp("us", "UTC")
    assert ours.field("u64").type == pa.int64()


def test_nested_values_are_converted_too(tmp_path):
    """A list of nanosecond timestamps, a struct's unsigned field and a map's unsigned values
    are converted in the file as at the top level, and read back as deltalake's."""
    data = pa.table(
        {
            "id": [0, 1],
            "lt": pa.array([[1_000_000_001], None], pa.list_(pa.timestamp("ns"))),
            "su": pa.array([{"a": 7}, None], pa.struct([("a", pa.uint8())])),
            "mu": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.uint32())),
        }
    )
    dataferry.write_dataset(data, str(tmp_path / "ours"), committer="delta")
    deltalake.write_deltalake(str(tmp_path / "theirs"), data)
    assert log_schema_and_protocol(tmp_path / "ours") == log_schema_and_protocol(
        tmp_path / "theirs"
    )
    ours = deltalake.DeltaTable(str(tmp_path / "ours")).to_pyarrow_table().sort_by("id")
    theirs = deltalake.DeltaTable(str(tmp_path / "theirs")).to_pyarrow_table().sort_by("id")
    same_rows(ours, theirs)
    file = pq.read_schema(next((tmp_path / "ours").glob("*.parquet")))
    assert file.field("mu").type.item_type == pa.int32()
    assert pl.read_delta(str(tmp_path / "ours")).height == 2


@pytest.mark.parametrize(
    ("column", "value"),
    [("u8", pa.array([200], pa.uint8())), ("u64", pa.array([2**63], pa.uint64()))],
)
def test_an_unsigned_value_past_the_signed_type_is_refused_naming_the_column(
    tmp_path, column, value
):
    """deltalake refuses it too (Delta has no unsigned types); broken, the value would wrap
    to a negative number in the table."""
    t = tmp_path / "t"
    data = pa.table({"id": [0], column: value})
    with pytest.raises((ConfigError, TaskFailed), match=f"column '{column}'.*wider signed type"):
        dataferry.write_dataset(data, str(t), committer="delta")
    assert not (t / "_delta_log").exists()
    assert not list(t.rglob("*.parquet")) if t.exists() else True


@pytest.mark.parametrize(
    ("kind", "advice"),
    [
        (pa.time64("us"), "time-of-day"),
        (pa.duration("us"), "duration"),
        (pa.decimal256(40, 2), "decimal128"),
    ],
)
def test_a_type_delta_has_not_is_refused_on_the_driver_without_a_backtrace(tmp_path, kind, advice):
    """Before any task writes, naming the column and what to cast it to; broken, the user
    gets deltalake's message with a Rust backtrace, or a failure after the tasks wrote."""
    t = tmp_path / "t"
    data = pa.table({"id": [0], "x": pa.array([1], pa.int64()).cast(kind, safe=False)})
    with pytest.raises(ConfigError, match=f"column 'x'.*{advice}") as caught:
        dataferry.write_dataset(data, str(t), committer="delta")
    assert "<unknown>" not in str(caught.value) and "\n" not in str(caught.value)
    assert not t.exists() or not any(t.rglob("*.parquet"))


def test_the_zoo_appends_to_a_table_deltalake_made_of_it(tmp_path):
    """The check against an existing table compares the types as Delta stores them: a
    nanosecond, zoned or unsigned column is the table's microsecond, UTC, signed column.
    Broken, the append is refused ("column 'ts_ns' is timestamp[ns] ...")."""
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), type_zoo(), partition_by=[PARTITION])
    dataferry.write_dataset(
        type_zoo(start=8), str(t), committer="delta", mode="append", partition_by=[PARTITION]
    )
    got = deltalake.DeltaTable(str(t)).to_pyarrow_table().sort_by("id")
    assert got.column("id").to_pylist() == list(range(16))
    assert got.column("ts_tz").type == pa.timestamp("us", "UTC")
    assert got.column("ts_ns")[8].as_py() == dt.datetime(2024, 3, 31, 7, 15, 7, 123464)
    assert pl.read_delta(str(t)).height == 16


def partition_values_in_log(path: Path) -> list[dict]:
    adds = [e["add"] for e in log_entries(path) if "add" in e]
    return sorted((a["partitionValues"] for a in adds), key=repr)


@pytest.mark.parametrize("column", ["ts_ns", "ts_tz", "flag", "d", "dec", "bin", "u8"])
def test_partition_values_are_logged_as_deltalake_logs_them(tmp_path, column):
    """Timestamps in UTC with microseconds, booleans in lower case, binary as the protocol
    escapes it. Broken, a zoned partition is logged in its local time with an offset, a
    boolean as Python's `True`, and bytes as Python's `b'...'` text."""
    data = type_zoo(4).select(["id", column])
    dataferry.write_dataset(data, str(tmp_path / "ours"), committer="delta", partition_by=[column])
    deltalake.write_deltalake(str(tmp_path / "theirs"), data, partition_by=[column])
    ours = partition_values_in_log(tmp_path / "ours")
    assert ours == partition_values_in_log(tmp_path / "theirs")


def test_an_unsigned_partition_value_past_the_signed_type_is_refused(tmp_path):
    """The log would record `200` for a byte column, which no reader reads; deltalake refuses
    it too. Refused before the commit is decided, naming the column; nothing is left."""
    t = tmp_path / "t"
    data = pa.table({"id": [0, 1], "p": pa.array([1, 200], pa.uint8())})
    with pytest.raises(DataferryError, match="partition column 'p' has the value 200"):
        dataferry.write_dataset(data, str(t), committer="delta", partition_by=["p"])
    assert not (t / "_delta_log").exists() and not list(t.rglob("*.parquet"))


def test_an_empty_partition_value_is_kept_apart_from_null(tmp_path):
    """deltalake logs '' as '' (in a `part=` directory) and null as null: so does dataferry,
    and polars reads '' back. Broken, '' lands in Hive's null directory and is logged null."""
    data = pa.table({"id": [0, 1, 2], "part": ["", None, "x"]})
    dataferry.write_dataset(data, str(tmp_path / "ours"), committer="delta", partition_by=["part"])
    deltalake.write_deltalake(str(tmp_path / "theirs"), data, partition_by=["part"])
    ours = partition_values_in_log(tmp_path / "ours")
    assert ours == partition_values_in_log(tmp_path / "theirs")
    assert {"part": ""} in ours and {"part": None} in ours
    got = pl.read_delta(str(tmp_path / "ours")).sort("id")
    assert got["part"].to_list() == ["", None, "x"]


def test_statistics_of_timestamps_are_written_as_deltalake_writes_them(tmp_path):
    """A naive (timestamp_ntz) column's bounds without a zone, `2024-03-30 23:15:07.123`, a
    UTC one's with `Z`, as deltalake's; and a filter on them still prunes to the right rows.
    Broken, the naive bounds carry a `Z` that says UTC of a value that has no zone."""
    data = type_zoo(4).select(["id", "ts_ns", "ts_utc"])
    dataferry.write_dataset(data, str(tmp_path / "ours"), committer="delta")
    deltalake.write_deltalake(str(tmp_path / "theirs"), data)

    def bounds(path: Path) -> tuple:
        add = next(e["add"] for e in log_entries(path) if "add" in e)
        stats = json.loads(add["stats"])
        return tuple(stats[k][c] for k in ("minValues", "maxValues") for c in ("ts_ns", "ts_utc"))

    assert bounds(tmp_path / "ours") == bounds(tmp_path / "theirs")
    table = deltalake.DeltaTable(str(tmp_path / "ours"))
    when = dt.datetime(2024, 3, 31, 1, 15, 7, 123458)
    assert table.to_pyarrow_table(filters=[("ts_ns", ">=", when)]).num_rows == 2


def test_a_dask_frame_of_the_zoo_reads_back_as_deltalake_writes_it(tmp_path):
    """The Dask form (one graph, the frame's schema from its `_meta`) converts alike: each
    partition's files hold the log's types. Broken, the tasks write nanoseconds and unsigned
    integers under a log that says microseconds and signed."""
    dd = pytest.importorskip("dask.dataframe")
    import dataferry.dask

    # the columns pandas holds as numpy or Arrow types (Dask turns object columns to strings)
    columns = ["id", PARTITION, "ts_ns", "ts_tz", "ts_utc", "u8", "u16", "u32", "u64"]
    frame = type_zoo_pandas()[[*columns, "i8", "f64", "cat", "s", "ls"]]
    ddf = dd.from_pandas(frame, npartitions=2)
    dataferry.dask.write_deltalake(ddf, str(tmp_path / "ours"), partition_by=[PARTITION])
    deltalake.write_deltalake(str(tmp_path / "theirs"), frame, partition_by=[PARTITION])
    ours = pl.read_delta(str(tmp_path / "ours")).sort("id")
    theirs = pl.read_delta(str(tmp_path / "theirs")).sort("id")
    assert ours.schema == theirs.schema
    assert ours.equals(theirs)


def test_a_partition_overwrite_keeps_the_empty_and_the_null_partition_apart(tmp_path):
    """deltalake's own file list gives '' as null. Broken, overwriting the '' partition
    leaves its old rows, and overwriting the null partition also deletes the '' one."""
    t = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
    dataferry.write_dataset(
        pa.table({"id": [0, 1, 2], "part": ["", None, "x"]}, schema=schema),
        t,
        committer="delta",
        partition_by=["part"],
    )

    def overwrite(rows: dict) -> list[tuple]:
        dataferry.write_dataset(
            pa.table(rows, schema=schema),
            t,
            committer="delta",
            partition_by=["part"],
            mode="overwrite-partitions",
        )
        got = pl.read_delta(t).sort("id")
        return list(zip(got["id"].to_list(), got["part"].to_list(), strict=True))

    assert overwrite({"id": [10], "part": [""]}) == [(1, None), (2, "x"), (10, "")]
    assert overwrite({"id": [20], "part": [None]}) == [(2, "x"), (10, ""), (20, None)]
