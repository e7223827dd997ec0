"""Iceberg partition transforms (`table/iceberg_partitions.py`): data appended by dataferry to
a table pyiceberg created with a spec of `year`/`month`/`day`/`hour`, `bucket[N]` or
`truncate[W]` is split by the transform's value, each file in one partition, its manifest
entry naming the partition pyiceberg's own append gives the same rows; and a spec given at
creation (`partition_spec`)."""

from __future__ import annotations

import datetime as dt
import decimal
import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry import make_committer
from dataferry.errors import ConfigError, JobCommitError

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")  # pyiceberg's transforms of Arrow arrays
pytestmark = pytest.mark.filterwarnings("ignore::Warning")

N = 40


def frame(n: int = N) -> pa.Table:
    """Rows spread over years, months, days and hours; ids and names of several buckets."""
    base = dt.datetime(2023, 11, 30, 22)
    ts = [base + dt.timedelta(hours=7 * i + (i % 3) * 24 * 11) for i in range(n)]
    ts[5] = None  # a null goes to the null partition
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "name": pa.array([f"{'abc'[i % 3]}{i % 5}x{i}" for i in range(n)]),
            "value": pa.array([float(i) for i in range(n)]),
            "d": pa.array([dt.date(2023, 12, 30) + dt.timedelta(days=9 * i) for i in range(n)]),
            "amount": pa.array(
                [decimal.Decimal(f"{i * 7 % 50}.{i % 100:02d}") for i in range(n)],
                pa.decimal128(9, 2),
            ),
            "blob": pa.array([f"{'xyz'[i % 3]}{i}".encode() for i in range(n)]),
        }
    )


def catalog_at(tmp_path):
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog(
        "t", type="sql", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path}"
    )
    catalog.create_namespace_if_not_exists("db")
    return catalog, {"catalog": {"name": "t", "type": "sql", "uri": catalog.properties["uri"]}}


def spec_of(schema, fields: list[tuple[str, str]]):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import parse_transform

    from dataferry.commit.table.iceberg.partitions import field_name

    return PartitionSpec(
        *[
            PartitionField(
                schema.find_field(c).field_id, 1000 + i, parse_transform(t), field_name(t, c)
            )
            for i, (t, c) in enumerate(fields)
        ]
    )


def create(catalog, tmp_path, name: str, fields: list[tuple[str, str]]):
    """A table pyiceberg creates with the spec `fields` ((transform, column) pairs)."""
    from dataferry.commit.table.iceberg.types import iceberg_schema

    schema = iceberg_schema("t", frame().schema)
    location = f"file://{tmp_path / name}"
    return catalog.create_table(
        f"db.{name}", schema, location=location, partition_spec=spec_of(schema, fields)
    )


def partitions(tbl) -> list[tuple]:
    """The partition of each data file in the table's manifests, sorted."""
    return sorted(
        (tuple(f["partition"].values()) for f in tbl.inspect.files().to_pylist()),
        key=repr,
    )


def file_partitions(tbl, fields: list[tuple[str, str]]) -> list[set]:
    """For each data file: the set of partition tuples its own rows are in (pyiceberg's
    transforms applied to the file's values), and the manifest's partition."""
    from pyiceberg.transforms import parse_transform

    out = []
    schema = tbl.schema()
    for task in tbl.scan().plan_files():
        rows = pq.read_table(task.file.file_path.removeprefix("file://"))
        found = set()
        for row in rows.to_pylist():
            key = []
            for t, c in fields:
                v = row[c]
                kind = schema.find_field(c).field_type
                if isinstance(v, dt.datetime):
                    v = int((v - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)
                elif isinstance(v, dt.date):
                    v = (v - dt.date(1970, 1, 1)).days
                key.append(None if v is None else parse_transform(t).transform(kind)(v))
            found.add(tuple(key))
        out.append((found, tuple(task.file.partition[i] for i in range(len(fields)))))
    return out


CASES = {
    "year": ([("year", "ts")], "ts"),
    "month": ([("month", "ts")], "ts"),
    "day": ([("day", "ts")], "ts"),
    "hour": ([("hour", "ts")], "ts"),
    "bucket": ([("bucket[4]", "id")], "id"),
    "bucket-of-string": ([("bucket[3]", "name")], "name"),
    "truncate-string": ([("truncate[1]", "name")], "name"),
    "truncate-long": ([("truncate[10]", "id")], "id"),
    "identity-and-day": ([("identity", "value"), ("day", "ts")], "ts"),
    "month-of-date": ([("month", "d")], "d"),
    "year-of-date": ([("year", "d")], "d"),
    "truncate-decimal": ([("truncate[1000]", "amount")], "amount"),
    "bucket-decimal": ([("bucket[3]", "amount")], "amount"),
    "bucket-binary": ([("bucket[4]", "blob")], "blob"),
    "truncate-binary": ([("truncate[1]", "blob")], "blob"),
}


def filters(column: str):
    """Filters on the source column, and the rows of `frame()` each keeps."""
    from pyiceberg.expressions import EqualTo, GreaterThanOrEqual, LessThan

    f = frame()
    if column == "ts":
        at = f.column("ts")[13].as_py()
        yield GreaterThanOrEqual("ts", at.isoformat()), pc.greater_equal(f["ts"], pa.scalar(at))
        yield LessThan("ts", at.isoformat()), pc.less(f["ts"], pa.scalar(at))
    elif column == "id":
        yield EqualTo("id", 7), pc.equal(f["id"], 7)
        yield GreaterThanOrEqual("id", 25), pc.greater_equal(f["id"], 25)
    elif column == "d":
        day = f.column("d")[13].as_py()
        yield GreaterThanOrEqual("d", day.isoformat()), pc.greater_equal(f["d"], pa.scalar(day))
    else:
        value = f.column(column)[8]
        yield EqualTo(column, value.as_py()), pc.equal(f[column], value)


@pytest.mark.parametrize("case", list(CASES))
def test_each_transform_splits_the_data_as_pyiceberg_does(tmp_path, case):
    """dataferry's append into a table pyiceberg created with the spec: every file holds the
    rows of exactly the partition its manifest entry names (a file filed under a wrong
    partition is pruned away by scans that want its rows), the partitions are those of
    pyiceberg's own append of the same rows, and a scan filtered on the source column
    returns exactly the matching rows."""
    fields, column = CASES[case]
    catalog, options = catalog_at(tmp_path)
    ours = create(catalog, tmp_path, "ours", fields)
    theirs = create(catalog, tmp_path, "theirs", fields)
    dataferry.write_dataset(
        frame(),
        str(tmp_path / "ours"),
        committer="iceberg",
        mode="append",
        committer_options={**options, "identifier": "db.ours"},
    )
    theirs.append(frame())
    ours, theirs = catalog.load_table("db.ours"), catalog.load_table("db.theirs")
    assert partitions(ours) == partitions(theirs)
    for found, recorded in file_partitions(ours, fields):
        assert found == {recorded}
    for row_filter, mask in filters(column):
        got = ours.scan(row_filter=row_filter).to_arrow()
        assert sorted(got["id"].to_pylist()) == sorted(frame().filter(mask)["id"].to_pylist())
    # the files hold the data's columns only (the split's key columns are left out)
    for path in (tmp_path / "ours" / "data").rglob("*.parquet"):
        assert pq.read_schema(path).names == frame().schema.names


def test_a_spec_given_at_creation(tmp_path):
    """`partition_spec` makes the table with that spec (as pyiceberg names its fields), the
    directories as Iceberg writers name them, one partition per file; pyiceberg's own append
    afterwards agrees on the partitions."""
    catalog, options = catalog_at(tmp_path)
    dest = tmp_path / "made"
    spec = ["day(ts)", "bucket[4](id)"]
    options = {**options, "identifier": "db.made", "partition_spec": spec}
    dataferry.write_dataset(frame(), str(dest), committer="iceberg", committer_options=options)
    tbl = catalog.load_table("db.made")
    assert tbl.schema().column_names == frame().schema.names  # no key column in the table
    assert [f.name for f in tbl.spec().fields] == ["ts_day", "id_bucket_4"]
    assert [str(f.transform) for f in tbl.spec().fields] == ["day", "bucket[4]"]
    fields = [("day", "ts"), ("bucket[4]", "id")]
    for found, recorded in file_partitions(tbl, fields):
        assert found == {recorded}
    dirs = {p.parent.relative_to(dest / "data").as_posix() for p in dest.rglob("*.parquet")}
    assert "ts_day=2023-11-30/id_bucket_4=0" in dirs or any(
        d.startswith("ts_day=2023-11-30/id_bucket_4=") for d in dirs
    )
    theirs = create(catalog, tmp_path, "theirs", fields)
    theirs.append(frame())
    assert partitions(tbl) == partitions(catalog.load_table("db.theirs"))
    # an append (no spec given) keeps splitting by the table's
    dataferry.write_dataset(
        frame(), str(dest), committer="iceberg", mode="append", committer_options=options
    )
    for found, recorded in file_partitions(catalog.load_table("db.made"), fields):
        assert found == {recorded}


def test_a_streamed_input_is_split_too(tmp_path):
    """Batches (a stream, spilled and written by segments) get the key columns as tables do."""
    catalog, options = catalog_at(tmp_path)
    create(catalog, tmp_path, "s", [("month", "ts")])
    batches = frame().to_batches(max_chunksize=7)
    dataferry.write_dataset(
        iter(batches),
        str(tmp_path / "s"),
        committer="iceberg",
        mode="append",
        committer_options={**options, "identifier": "db.s"},
    )
    tbl = catalog.load_table("db.s")
    for found, recorded in file_partitions(tbl, [("month", "ts")]):
        assert found == {recorded}
    assert tbl.scan().to_arrow().num_rows == N


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (["days(ts)"], r"unknown transform 'days'"),
        (["bucket(id)"], r"unknown transform 'bucket'"),
        (["bucket[0](id)"], r"width above 0"),
        ("day(ts)", r"tuple or list"),
        (["day(ts)", "day(ts)"], r"twice"),
    ],
)
def test_a_spec_that_is_not_one_is_refused_naming_the_field(tmp_path, spec, words):
    """A misspelt field (Spark's `days`, a bucket without its count) is refused when the
    committer is made: taken as an identity of a column named `days(ts)`, or guessed, it would
    create a table partitioned otherwise than its user wrote."""
    with pytest.raises(ConfigError, match=words):
        make_committer("iceberg", str(tmp_path / "t"), partition_spec=spec)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (["day(nope)"], r"day\(nope\).*no column 'nope'"),
        (["day(id)"], r"day\(id\).*'id' is long, which day does not take"),
    ],
)
def test_a_spec_the_data_cannot_take_is_refused_before_any_task(tmp_path, spec, words):
    """A column the data lacks, or a transform its type does not take, fails on the driver
    naming the field: not at the catalog after every task has written."""
    dest = tmp_path / "t"
    with pytest.raises(ConfigError, match=words):
        dataferry.write_dataset(
            frame(), str(dest), committer="iceberg", committer_options={"partition_spec": spec}
        )
    assert not list(dest.rglob("*.parquet"))


def test_another_spec_than_the_tables_is_refused(tmp_path):
    """A spec that is not the table's would have the files split one way and filed another:
    refused, before any file is written."""
    catalog, options = catalog_at(tmp_path)
    create(catalog, tmp_path, "o", [("day", "ts")])
    options = {**options, "identifier": "db.o", "partition_spec": ["month(ts)"]}
    with pytest.raises(ConfigError, match=r"partitioned by \['day\(ts\)'\].*month\(ts\)"):
        dataferry.write_dataset(
            frame(),
            str(tmp_path / "o"),
            committer="iceberg",
            mode="append",
            committer_options=options,
        )
    assert not list((tmp_path / "o").rglob("*.parquet"))


def test_a_file_in_another_buckets_directory_is_refused(tmp_path):
    """A file whose directory names one bucket and whose rows lie in another (a writer that
    split wrongly) is refused at commit: filed under the directory's bucket, its rows would
    be pruned away by every scan that looks for them."""
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType

    catalog, options = catalog_at(tmp_path)
    create(catalog, tmp_path, "w", [("bucket[4]", "id")])
    bucket = BucketTransform(4).transform(LongType())
    other = (bucket(7) + 1) % 4
    c = make_committer("iceberg", str(tmp_path / "w"), **options, identifier="db.w")
    job = c.new_job()
    c.setup_job(job)
    task = job.task(0)
    c.setup_task(task)
    buf = io.BytesIO()
    pq.write_table(frame().filter(pc.equal(frame()["id"], 7)), buf)
    c.write_file(task, f"id_bucket_4={other}/part-0.parquet", buf.getvalue())
    msg = c.commit_task(task)
    with pytest.raises((ConfigError, JobCommitError), match=r"lies in directory id_bucket_4="):
        c.commit_job(job, [msg])
    assert catalog.load_table("db.w").current_snapshot() is None


def test_a_dask_frame_is_split_by_the_spec(tmp_path):
    """Dask's write (`to_parquet`'s one graph) adds the key columns in each partition's task:
    without them a partition's file would hold rows of several buckets and be refused."""
    dd = pytest.importorskip("dask.dataframe")
    import dataferry.dask as fdask

    catalog, options = catalog_at(tmp_path)
    dest = tmp_path / "d"
    options = {**options, "identifier": "db.d", "partition_spec": ["bucket[4](id)", "month(ts)"]}
    ddf = dd.from_pandas(frame().to_pandas(), npartitions=2)
    fdask.to_parquet(
        ddf,
        str(dest),
        committer="iceberg",
        committer_options=options,
        write_index=False,
        compute_kwargs={"scheduler": "threads"},
    )
    tbl = catalog.load_table("db.d")
    assert tbl.schema().column_names == frame().schema.names  # no key column in the table
    for found, recorded in file_partitions(tbl, [("bucket[4]", "id"), ("month", "ts")]):
        assert found == {recorded}
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(N))


@pytest.mark.parametrize("field", [("truncate[1]", "name"), ("identity", "name")])
def test_an_empty_string_is_a_partition_apart_from_null(tmp_path, field):
    """'' and null are two partitions, as pyiceberg's append makes them: were '' filed with
    the nulls, the file would hold both and the commit refuse it."""
    catalog, options = catalog_at(tmp_path)
    create(catalog, tmp_path, "e", [field])
    create(catalog, tmp_path, "theirs", [field])
    rows = frame(6).set_column(2, "name", pa.array(["", None, "a1", "", "b", None]))
    options = {**options, "identifier": "db.e"}
    dataferry.write_dataset(
        rows, str(tmp_path / "e"), committer="iceberg", mode="append", committer_options=options
    )
    catalog.load_table("db.theirs").append(rows)
    ours = catalog.load_table("db.e")
    assert partitions(ours) == partitions(catalog.load_table("db.theirs"))
    for found, recorded in file_partitions(ours, [field]):
        assert found == {recorded}


def test_a_partition_overwrite_replaces_the_days_written_only(tmp_path):
    """`overwrite-partitions` into a day-partitioned table replaces the files of the days the
    job writes (each file in one day) and keeps every other day's rows."""
    catalog, options = catalog_at(tmp_path)
    create(catalog, tmp_path, "o", [("day", "ts")])
    options = {**options, "identifier": "db.o"}
    dest = str(tmp_path / "o")
    dataferry.write_dataset(
        frame(), dest, committer="iceberg", mode="append", committer_options=options
    )
    day = frame().column("ts")[13].as_py().date()
    again = frame().filter(pc.equal(pc.cast(frame()["ts"], pa.date32()), pa.scalar(day)))
    again = again.set_column(3, "value", pa.array([-1.0] * again.num_rows))
    dataferry.write_dataset(
        again, dest, committer="iceberg", mode="overwrite-partitions", committer_options=options
    )
    got = catalog.load_table("db.o").scan().to_arrow()
    assert got.num_rows == N
    on_day = got.filter(pc.equal(pc.cast(got["ts"], pa.date32()), pa.scalar(day)))
    assert set(on_day["value"].to_pylist()) == {-1.0}
    assert set(got["value"].to_pylist()) - {-1.0} == set(frame()["value"].to_pylist()) - set(
        frame()
        .filter(pc.equal(pc.cast(frame()["ts"], pa.date32()), pa.scalar(day)))["value"]
        .to_pylist()
    )


def test_a_column_named_as_a_partition_field_is_refused(tmp_path):
    """The split adds a key column named as the partition field (`ts_day`): a data column of
    that name would be taken for it, filing rows by the user's values, not the transform's."""
    catalog, options = catalog_at(tmp_path)
    create(catalog, tmp_path, "c", [("day", "ts")])
    rows = frame().append_column("ts_day", pa.array(["x"] * N))
    options = {**options, "identifier": "db.c", "schema_mode": "merge"}
    with pytest.raises(ConfigError, match=r"column 'ts_day'.*day\(ts\)"):
        dataferry.write_dataset(
            rows, str(tmp_path / "c"), committer="iceberg", mode="append", committer_options=options
        )
    assert not list((tmp_path / "c").rglob("*.parquet"))


def test_nanoseconds_and_zones_are_split_by_the_days_the_files_hold(tmp_path):
    """pandas' nanosecond timestamps and a zone other than UTC: the key is computed on the
    values as the files hold them (microseconds, UTC), so a row near midnight in New York is
    filed under its UTC day, as pyiceberg files the same instants; by the local day its file
    would lie in the wrong partition, and be refused at commit."""
    from dataferry.commit.table.iceberg.types import iceberg_schema

    catalog, options = catalog_at(tmp_path)
    utc = frame().set_column(1, "ts", frame()["ts"].cast(pa.timestamp("us", "UTC")))
    schema = iceberg_schema("t", utc.schema)
    for name in ("ours", "theirs"):
        catalog.create_table(
            f"db.{name}",
            schema,
            location=f"file://{tmp_path / name}",
            partition_spec=spec_of(schema, [("day", "ts")]),
        )
    local = utc.set_column(1, "ts", utc["ts"].cast(pa.timestamp("ns", "America/New_York")))
    dataferry.write_dataset(
        local,
        str(tmp_path / "ours"),
        committer="iceberg",
        mode="append",
        committer_options={**options, "identifier": "db.ours"},
    )
    catalog.load_table("db.theirs").append(utc)
    ours = catalog.load_table("db.ours")
    assert partitions(ours) == partitions(catalog.load_table("db.theirs"))
    assert ours.scan().to_arrow().num_rows == N


def test_the_spec_forms_read_as_pyiceberg_prints_them():
    """Each form reads as the field it names, named as pyiceberg names it (the directories
    and the fields of a table pyiceberg users extend with `add_field`)."""
    from dataferry.commit.table.iceberg.partitions import field_name, parse_spec

    got = parse_spec(["id", "identity(value)", "bucket[ 16 ](id)", "truncate[4](name)", "hour(ts)"])
    assert got == (
        ("identity", "id"),
        ("identity", "value"),
        ("bucket[16]", "id"),
        ("truncate[4]", "name"),
        ("hour", "ts"),
    )
    assert [field_name(t, c) for t, c in got] == [
        "id",
        "value",
        "id_bucket_16",
        "name_trunc_4",
        "ts_hour",
    ]


def test_partition_by_may_name_the_specs_columns_only(tmp_path):
    """partition_by naming a source column of the spec is the spec's split; naming another
    column would make a table partitioned otherwise than the caller says: refused."""
    spec = {"partition_spec": ["day(ts)"]}
    with pytest.raises(ConfigError, match=r"not partitioned by \['value'\]"):
        dataferry.write_dataset(
            frame(),
            str(tmp_path / "a"),
            partition_by=["value"],
            committer="iceberg",
            committer_options=spec,
        )
    dataferry.write_dataset(
        frame(),
        str(tmp_path / "b"),
        partition_by=["ts"],
        committer="iceberg",
        committer_options=spec,
    )
    from dataferry.commit.lookup import committer_by_name
    from dataferry.store import open_store

    tbl = committer_by_name("iceberg", open_store(str(tmp_path / "b"))).table()
    assert [str(f.transform) for f in tbl.spec().fields] == ["day"]
    for found, recorded in file_partitions(tbl, [("day", "ts")]):
        assert found == {recorded}
