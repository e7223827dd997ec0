"""The Hudi committer's type policy: the type zoo (what pandas 2/3, numpy and polars hand over)
written with committer="hudi" is read back by hudi-rs with the same values, as Hudi's own
writers keep them (microsecond UTC timestamps, signed integers, strings for categoricals);
types Hudi has none for are refused on the driver naming the column."""

from __future__ import annotations

import datetime as dt
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.errors import ConfigError
from dataferry.verify.type_zoo import ZOO_COLUMNS, type_zoo, type_zoo_pandas

hudi = pytest.importorskip("hudi")

OPTIONS = {"table_name": "zoo", "record_key": "id"}


def write(data, dest, partition_by=(), **kw):
    return dataferry.write_dataset(
        data,
        str(dest),
        partition_by=list(partition_by),
        committer="hudi",
        committer_options={**OPTIONS, **kw.pop("options", {})},
        mode="append",
        **kw,
    )


def read(path) -> pa.Table:
    batches = hudi.HudiTableBuilder.from_base_uri(str(path)).build().read()
    return pa.Table.from_batches(batches).sort_by("id")


def values(column) -> list:
    """Python values, NaN as a string (NaN equals nothing, not even itself)."""
    return ["nan" if isinstance(v, float) and math.isnan(v) else v for v in column.to_pylist()]


def naive(column) -> list:
    return [None if v is None else v.replace(tzinfo=None) for v in column.to_pylist()]


def as_hudi_keeps(zoo: pa.Table, got: pa.Table) -> None:
    """Every value of the zoo as Hudi's writers keep it."""
    assert got.num_rows == zoo.num_rows
    utc = pa.timestamp("us", "UTC")
    for name in ("ts_ns", "ts_tz", "ts_utc"):
        assert got.schema.field(name).type == utc, name
    # naive: the wall-clock time as UTC (Spark, session zone UTC); zoned: the same instants
    assert naive(got.column("ts_ns")) == naive(zoo.column("ts_ns").cast(pa.timestamp("us")))
    assert got.column("ts_tz").to_pylist() == zoo.column("ts_tz").cast(utc).to_pylist()
    assert got.column("ts_tz").to_pylist() == got.column("ts_utc").to_pylist()
    wider = {"u8": pa.int32(), "u16": pa.int32(), "u32": pa.int64(), "u64": pa.int64(),
             "i8": pa.int32(), "i16": pa.int32(), "cat": pa.string(), "ls": pa.string()}  # fmt: skip
    for name, t in wider.items():
        assert got.schema.field(name).type == t, name
    for name in zoo.column_names:
        if name.startswith("ts_"):
            continue
        assert values(got.column(name)) == values(zoo.column(name)), name


@pytest.mark.parametrize("partition_by", [(), ("part",)])
def test_the_type_zoo_reads_back_through_hudi_rs(tmp_path, partition_by):
    """The zoo as arrow holds it, partitioned and not: broken, hudi-rs panics on a naive
    timestamp (Avro local-timestamp), or a map is refused, or values change."""
    path = tmp_path / "t"
    zoo = type_zoo()
    write(zoo, path, partition_by)
    as_hudi_keeps(zoo, read(path))
    # the recorded schema and every base file hold the same types
    (commit,) = (path / ".hoodie").glob("*.commit")
    schema = json.loads(json.loads(commit.read_text())["extraMetadata"]["schema"])
    assert "local-timestamp" not in json.dumps(schema)
    for f in path.rglob("*.parquet"):
        held = pq.read_schema(f)
        assert held.field("ts_ns").type == pa.timestamp("us", "UTC")
        assert held.field("u64").type == pa.int64()
    # an upsert of rows 4..11 (each in its partition) merges into the files of the converted
    # rows: one row per id
    write(type_zoo(12).slice(4), path, partition_by)
    got = read(path)
    assert got.column("id").to_pylist() == list(range(12))
    as_hudi_keeps(type_zoo(12), got)


def test_the_pandas_type_zoo_reads_back_through_hudi_rs(tmp_path):
    """The zoo as pandas hands it over (ns datetimes, categoricals, numpy unsigned): broken,
    the pandas user's table is unreadable or its values change."""
    path = tmp_path / "t"
    # a map column is a list of pairs in pandas: pyarrow cannot tell it from a list by itself
    frame = type_zoo_pandas().drop(columns=["mp"])
    write(frame, path, ("part",))
    columns = [c for c in ZOO_COLUMNS if c != "mp"]
    # the frame as pyarrow (and pandas.to_parquet) takes it: a NaN is a null
    handed = pa.Table.from_pandas(frame, preserve_index=False).select(columns)
    assert handed.column("u64").type == pa.uint64() and handed.column("cat").type.value_type
    as_hudi_keeps(handed, read(path).select(columns))


@pytest.mark.parametrize(
    "column, data, advice",
    [
        ("t", pa.array([dt.time(1, 2)], pa.time64("us")), "no time-of-day type"),
        ("span", pa.array([dt.timedelta(seconds=3)], pa.duration("us")), "no duration type"),
        ("m", pa.array([[(1, 2)]], pa.map_(pa.int64(), pa.int64())), "string keys"),
        ("nothing", pa.nulls(1), "nulls only"),
    ],
)
def test_a_type_hudi_has_none_for_is_refused_on_the_driver(tmp_path, column, data, advice):
    """Refused before any task writes, naming the column and what to do: broken, the tasks
    write files a Hudi table cannot describe and hudi-rs cannot read."""
    path = tmp_path / "t"
    table = pa.table({"id": pa.array([1], pa.int64()), column: data})
    with pytest.raises(ConfigError, match=rf"column '{column}'.*{advice}"):
        write(table, path)
    assert not path.exists() or not any(path.rglob("*"))


def test_an_unsigned_value_past_the_signed_range_fails_naming_the_column(tmp_path):
    """A uint64 beyond 2**63-1 has no Hudi long: the job fails naming the column and commits
    nothing; broken, it wraps to a negative number."""
    path = tmp_path / "t"
    write(pa.table({"id": pa.array([1], pa.int64()), "u": pa.array([5], pa.uint64())}), path)
    big = pa.table({"id": pa.array([2], pa.int64()), "u": pa.array([2**63 + 1], pa.uint64())})
    with pytest.raises(Exception, match="'u'"):
        write(big, path)
    assert read(path).column("u").to_pylist() == [5]
