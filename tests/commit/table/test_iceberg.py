"""The Iceberg committer: one snapshot per job through pyiceberg's catalog, read back by
pyiceberg and polars, exactly once whatever the commit's answer, and no orphan data file."""

from __future__ import annotations

import pickle
import warnings

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.iceberg import JOB_UUID_KEY, IcebergConfig
from dataferry.commit.table.iceberg.committer import IcebergFormat
from dataferry.errors import ConfigError, JobCommitError
from dataferry.store import FaultRule, Op, open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def data(n: int = 200, start: int = 0, days: int = 3) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "value": pa.array([float(i) / 2 for i in ids]),
            "day": pa.array([f"2024-01-0{1 + i % days}" for i in ids]),
        }
    )


def sql_catalog(tmp_path) -> dict[str, str]:
    return {
        "name": "tests",
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": f"file://{tmp_path / 'warehouse'}",
    }


def table_of(dest) -> object:
    """The table as a committer with default options finds it (as recovery does)."""
    tbl = committer_by_name("iceberg", open_store(str(dest))).table()
    assert tbl is not None
    return tbl


def rows(table: pa.Table) -> list[dict]:
    table = table.select(["id", "value", "day"]).cast(
        pa.schema([("id", pa.int64()), ("value", pa.float64()), ("day", pa.string())])
    )
    return table.sort_by("id").to_pylist()


def polars_rows(tbl) -> list[dict]:
    import polars as pl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = pl.scan_iceberg(tbl).collect()
    return rows(frame.to_arrow())


def orphans(dest, tbl) -> list[str]:
    """Parquet files under data/ that no snapshot of the table references."""
    referenced = {
        t.file.file_path.removeprefix("file://")
        for s in tbl.snapshots()
        for t in tbl.scan(snapshot_id=s.snapshot_id).plan_files()
    }
    on_disk = {str(p) for p in (dest / "data").rglob("*.parquet")}
    return sorted(on_disk - referenced)


def unreferenced_now(dest, tbl) -> list[str]:
    """Parquet files under data/ that the current snapshot does not reference."""
    live = {p.removeprefix("file://") for p in tbl.inspect.files().column("file_path").to_pylist()}
    return sorted({str(p) for p in (dest / "data").rglob("*.parquet")} - live)


def job_snapshots(tbl, job_uuid: str) -> list:
    return [s for s in tbl.snapshots() if s.summary.get(JOB_UUID_KEY) == job_uuid]


# --- creation, append, the embedded catalog --------------------------------------------------


def test_creates_a_partitioned_table_and_appends_twice(tmp_path):
    dest = tmp_path / "t"
    first = dataferry.write_dataset(
        data(200), str(dest), partition_by=["day"], committer="iceberg", mode="append"
    )
    tbl = table_of(dest)
    assert tbl.name() == ("default", "t")
    assert [f.name for f in tbl.spec().fields] == ["day"]
    assert str(tbl.spec().fields[0].transform) == "identity"
    assert rows(tbl.scan().to_arrow()) == rows(data(200))
    assert (dest / "_dataferry_iceberg" / "catalog.db").exists()  # embedded, in the table

    second = dataferry.write_dataset(
        data(150, start=200), str(dest), partition_by=["day"], committer="iceberg", mode="append"
    )
    tbl = table_of(dest)
    expected = rows(pa.concat_tables([data(200), data(150, start=200)]))
    assert rows(tbl.scan().to_arrow()) == expected
    assert polars_rows(tbl) == expected
    ops = [s.summary.operation.value for s in tbl.snapshots()]
    assert ops == ["append", "append"]
    for result in (first, second):
        assert len(job_snapshots(tbl, result.run.job.job_uuid)) == 1
    # identity partition values come from the files' own partition column
    partitions = {r["partition"]["day"] for r in tbl.inspect.files().to_pylist()}
    assert partitions == {"2024-01-01", "2024-01-02", "2024-01-03"}
    files = [p.removeprefix("file://") for p in tbl.inspect.files().column("file_path").to_pylist()]
    assert all(f.startswith(str(dest / "data" / "day=")) for f in files)
    assert orphans(dest, tbl) == [] and unreferenced_now(dest, tbl) == []
    assert not (dest / "_dataferry" / "iceberg-markers").exists()


def test_unpartitioned_table(tmp_path):
    dest = tmp_path / "t"
    dataferry.write_dataset(data(120), str(dest), committer="iceberg", mode="append")
    dataferry.write_dataset(data(80, start=120), str(dest), committer="iceberg", mode="append")
    tbl = table_of(dest)
    assert tbl.spec().is_unpartitioned()
    assert rows(tbl.scan().to_arrow()) == rows(data(200))
    assert polars_rows(tbl) == rows(data(200))
    assert unreferenced_now(dest, tbl) == []


def test_a_given_sql_catalog_and_identifier(tmp_path):
    from pyiceberg.catalog import load_catalog

    dest = tmp_path / "t"
    props = sql_catalog(tmp_path)
    options = {"catalog": props, "identifier": "ns.sales", "snapshot_properties": {"who": "me"}}
    for start in (0, 100):
        dataferry.write_dataset(
            data(100, start=start),
            str(dest),
            partition_by=["day"],
            committer="iceberg",
            mode="append",
            committer_options=options,
        )
    catalog = load_catalog(props["name"], **{k: v for k, v in props.items() if k != "name"})
    tbl = catalog.load_table("ns.sales")
    assert tbl.metadata.location.removeprefix("file://") == str(dest)
    assert rows(tbl.scan().to_arrow()) == rows(data(200))
    assert polars_rows(tbl) == rows(data(200))
    assert tbl.current_snapshot().summary.get("who") == "me"
    assert not (dest / "_dataferry_iceberg" / "catalog.db").exists()
    # a committer with default options (recovery's) finds the catalog and table from the store
    found = table_of(dest)
    assert found.name() == ("ns", "sales")
    assert committer_by_name("iceberg", open_store(str(dest))).table_files() == sorted(
        p.removeprefix(f"file://{dest}/")
        for p in tbl.inspect.files().column("file_path").to_pylist()
    )


def test_a_catalog_object_stays_on_the_driver(tmp_path):
    from pyiceberg.catalog import load_catalog

    props = sql_catalog(tmp_path)
    catalog = load_catalog(props["name"], **{k: v for k, v in props.items() if k != "name"})
    config = IcebergConfig(catalog=catalog, identifier="ns.obj")
    copy = pickle.loads(pickle.dumps(config))
    assert copy.catalog is None and copy.catalog_properties["uri"] == props["uri"]
    assert copy == config
    dest = tmp_path / "t"
    dataferry.write_dataset(
        data(60),
        str(dest),
        committer="iceberg",
        mode="append",
        committer_options={"catalog": catalog, "identifier": "ns.obj"},
    )
    assert rows(catalog.load_table("ns.obj").scan().to_arrow()) == rows(data(60))


def test_options_are_checked():
    with pytest.raises(ConfigError, match=r"namespace\.table"):
        IcebergConfig(identifier="plain")
    with pytest.raises(ConfigError, match="catalog must be"):
        IcebergConfig(catalog=42)


# --- modes -----------------------------------------------------------------------------------


def test_overwrite_replaces_every_file_in_one_snapshot(tmp_path):
    dest = tmp_path / "t"
    write = dict(partition_by=["day"], committer="iceberg")
    dataferry.write_dataset(data(200), str(dest), mode="append", **write)
    before = table_of(dest).current_snapshot().snapshot_id
    dataferry.write_dataset(data(50, start=1000, days=1), str(dest), mode="overwrite", **write)
    tbl = table_of(dest)
    assert rows(tbl.scan().to_arrow()) == rows(data(50, start=1000, days=1))
    assert polars_rows(tbl) == rows(data(50, start=1000, days=1))
    snap = tbl.current_snapshot()
    assert snap.summary.operation.value == "overwrite"
    assert snap.parent_snapshot_id == before
    assert rows(tbl.scan(snapshot_id=before).to_arrow()) == rows(data(200))  # time travel
    assert orphans(dest, tbl) == []


def test_overwrite_partitions_replaces_only_the_partitions_written(tmp_path):
    dest = tmp_path / "t"
    write = dict(partition_by=["day"], committer="iceberg")
    dataferry.write_dataset(data(300), str(dest), mode="append", **write)
    fresh = data(20, start=5000, days=1)  # only 2024-01-01
    dataferry.write_dataset(fresh, str(dest), mode="overwrite-partitions", **write)
    tbl = table_of(dest)
    old = data(300).filter(pc.not_equal(data(300)["day"], "2024-01-01"))
    expected = rows(pa.concat_tables([old, fresh]))
    assert rows(tbl.scan().to_arrow()) == expected
    assert polars_rows(tbl) == expected
    assert len(tbl.snapshots()) == 2
    assert orphans(dest, tbl) == []


# --- interop and refusals ------------------------------------------------------------------


def test_appends_to_a_table_pyiceberg_made(tmp_path):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    dest = tmp_path / "t"
    props = sql_catalog(tmp_path)
    catalog = load_catalog(props["name"], **{k: v for k, v in props.items() if k != "name"})
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "value", DoubleType()),
        NestedField(3, "day", StringType()),
    )
    spec = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "day"))
    tbl = catalog.create_table("db.made", schema, location=f"file://{dest}", partition_spec=spec)
    tbl.append(data(100))
    dataferry.write_dataset(
        data(100, start=100),
        str(dest),
        partition_by=["day"],
        committer="iceberg",
        mode="append",
        committer_options={"catalog": props, "identifier": "db.made"},
    )
    tbl = catalog.load_table("db.made")
    assert rows(tbl.scan().to_arrow()) == rows(data(200))
    assert polars_rows(tbl) == rows(data(200))
    assert len(tbl.snapshots()) == 2
    # pyiceberg appends again after dataferry: the name mapping dataferry set keeps both readable
    tbl.append(data(10, start=200))
    assert rows(catalog.load_table("db.made").scan().to_arrow()) == rows(data(210))


@pytest.mark.parametrize(
    "bad, column",
    [
        (data(10).append_column("extra", pa.array(range(10))), "extra"),
        (data(10).drop_columns(["value"]), "value"),
        (data(10).set_column(0, "id", pa.array([str(i) for i in range(10)])), "id"),
    ],
)
def test_a_schema_the_table_does_not_have_is_refused_before_any_file(tmp_path, bad, column):
    dest = tmp_path / "t"
    dataferry.write_dataset(data(30), str(dest), partition_by=["day"], committer="iceberg")
    files = sorted((dest / "data").rglob("*"))
    with pytest.raises(ConfigError, match=repr(column)):
        dataferry.write_dataset(
            bad, str(dest), partition_by=["day"], committer="iceberg", mode="append"
        )
    assert sorted((dest / "data").rglob("*")) == files
    assert not (dest / "_dataferry" / "iceberg-markers").exists()


def test_other_partition_columns_are_refused(tmp_path):
    dest = tmp_path / "t"
    dataferry.write_dataset(data(30), str(dest), partition_by=["day"], committer="iceberg")
    with pytest.raises(ConfigError, match=r"partitioned by \['day'\].*not partitioned by"):
        dataferry.write_dataset(
            data(30), str(dest), partition_by=["id"], committer="iceberg", mode="append"
        )


def test_an_append_without_partition_by_takes_the_tables_partitioning(tmp_path):
    """As deltalake's append: the table's spec splits the data. Were it not split, the
    append's files would hold rows of several days and the commit would refuse them."""
    dest = tmp_path / "t"
    dataferry.write_dataset(data(30), str(dest), partition_by=["day"], committer="iceberg")
    dataferry.write_dataset(data(30, start=30), str(dest), committer="iceberg", mode="append")
    tbl = table_of(dest)
    days = [f["partition"]["day"] for f in tbl.inspect.files().to_pylist()]
    assert sorted(set(days)) == sorted(set(data(30).column("day").to_pylist()))
    assert len(days) == 2 * len(set(days))  # one file per day per job
    assert tbl.scan().to_arrow().num_rows == 60


# --- exactly once, and no orphan -----------------------------------------------------------


def test_a_commit_that_keeps_failing_leaves_no_orphan_after_cleanup(tmp_path):
    from dataferry.commit.job.cleanup import cleanup_destination

    dest = tmp_path / "t"
    dataferry.write_dataset(data(100), str(dest), partition_by=["day"], committer="iceberg")
    rule = FaultRule(action="fail", kinds=frozenset({Op.TABLE_COMMIT}), times=-1)
    store = open_store(str(dest), faults=[rule])
    with pytest.raises(JobCommitError):
        dataferry.write_dataset(
            data(100, start=100), store, partition_by=["day"], committer="iceberg", mode="append"
        )
    cleanup_destination(open_store(str(dest)))  # rolls the decided job forward, or back
    tbl = table_of(dest)
    got = rows(tbl.scan().to_arrow())
    assert got in (rows(data(100)), rows(data(200)))
    assert orphans(dest, tbl) == [] and unreferenced_now(dest, tbl) == []
    assert not (dest / "_dataferry" / "iceberg-markers").exists()


def test_an_overwrite_racing_another_commit_fails_loudly(tmp_path, monkeypatch):
    from dataferry.errors import TableCommitConflict

    dest = tmp_path / "t"
    dataferry.write_dataset(data(100), str(dest), partition_by=["day"], committer="iceberg")
    made = IcebergFormat.data_files

    races = []

    def racing(self, ctx, job, metadata, facts):
        # another writer appends after the overwrite read the table, before its commit (on
        # each try: the job commit tries a failed decided commit once more)
        table_of(dest).append(data(7, start=900 + 10 * len(races)))
        races.append(1)
        return made(self, ctx, job, metadata, facts)

    monkeypatch.setattr(IcebergFormat, "data_files", racing)
    with pytest.raises((TableCommitConflict, JobCommitError), match="conflict"):
        dataferry.write_dataset(
            data(5, start=500),
            str(dest),
            partition_by=["day"],
            committer="iceberg",
            mode="overwrite",
        )
    monkeypatch.undo()
    tbl = table_of(dest)
    # nothing lost: the first job's rows and the racing writer's, none of the overwrite's
    racers = [data(7, start=900 + 10 * i) for i in range(len(races))]
    assert races and rows(tbl.scan().to_arrow()) == rows(pa.concat_tables([data(100), *racers]))
    assert [s.summary.operation.value for s in tbl.snapshots()] == ["append"] * (1 + len(races))
    assert unreferenced_now(dest, tbl) == []


# --- the footers, once ----------------------------------------------------------------------


def test_each_footer_is_read_once_at_job_commit_whatever_the_tries(tmp_path, monkeypatch):
    from dataferry.commit.table.iceberg import files as iceberg_files
    from dataferry.store.pool import IOPool

    dest = tmp_path / "t"
    dataferry.write_dataset(data(60), str(dest), partition_by=["day"], committer="iceberg")
    # tasks without drafts of their DataFiles (`drafts.py`): the job commit reads the footers
    monkeypatch.setattr(IcebergFormat, "file_report", lambda *args: None)
    reads: list[str] = []
    real_read = iceberg_files.read_footer
    monkeypatch.setattr(
        iceberg_files, "read_footer", lambda store, p: reads.append(p) or real_read(store, p)
    )
    pooled: list[int] = []
    real_map = IOPool.map
    monkeypatch.setattr(
        IOPool,
        "map",
        lambda self, fn, items, **kw: real_map(self, fn, pooled.append(1) or items, **kw),
    )
    made = IcebergFormat.data_files
    calls: list[int] = []

    def counted(self, ctx, job, metadata, facts):
        calls.append(1)
        return made(self, ctx, job, metadata, facts)

    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table import Transaction

    real_commit, failed = Transaction.commit_transaction, []

    def conflict(self):
        if len(failed) < 2:  # another writer's commit came first, twice
            failed.append(1)
            raise CommitFailedException("injected conflict")
        return real_commit(self)

    monkeypatch.setattr(IcebergFormat, "data_files", counted)
    monkeypatch.setattr(Transaction, "commit_transaction", conflict)
    dataferry.write_dataset(
        data(60, start=100), str(dest), partition_by=["day"], committer="iceberg", mode="append"
    )
    assert len(failed) == 2 and len(calls) == 4  # the plan's check, then three tries
    assert len(reads) == len(set(reads)) == 3  # one per file (three days), never again
    assert pooled  # through the job's I/O pool
    tbl = table_of(dest)
    expected = rows(pa.concat_tables([data(60), data(60, start=100)]))
    assert rows(tbl.scan().to_arrow()) == expected


# --- object storage ------------------------------------------------------------------------


def test_a_table_on_s3_with_a_sql_catalog(tmp_path, s3_server, s3_url):
    from pyiceberg.catalog import load_catalog

    from dataferry.testing import CREDENTIALS

    # no catalog: the embedded SQLite one cannot live on S3, refused before any file
    with pytest.raises(ConfigError, match="give committer_options=\\{'catalog'"):
        dataferry.write_dataset(data(10), s3_url, committer="iceberg", mode="append")
    assert list(open_store(s3_url).walk("")) == []

    props = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'c.db'}",
        "warehouse": f"{s3_url}/wh",
        "s3.endpoint": s3_server.endpoint,
        "s3.access-key-id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "s3.region": "us-east-1",
    }
    options = {"catalog": {"name": "s3cat", **props}, "identifier": "ns.s3t"}
    write = dict(partition_by=["day"], committer="iceberg", committer_options=options)
    dataferry.write_dataset(data(80, days=2), s3_url, mode="append", **write)
    dataferry.write_dataset(data(40, start=80, days=1), s3_url, mode="append", **write)
    tbl = load_catalog("s3cat", **props).load_table("ns.s3t")
    assert tbl.metadata.location == s3_url
    expected = rows(pa.concat_tables([data(80, days=2), data(40, start=80, days=1)]))
    assert rows(tbl.scan().to_arrow()) == expected
    # nothing of the secrets is written down in the table's location
    store = open_store(s3_url)
    assert CREDENTIALS["AWS_SECRET_ACCESS_KEY"].encode() not in store.read_bytes(
        "_dataferry_iceberg/table.json"
    )
    committer = committer_by_name("iceberg", store)  # as recovery: no secrets recorded
    on_store = {s.path for s in store.walk("data") if s.path.endswith(".parquet")}
    assert committer.referenced_files() == on_store and len(on_store) == 3
    assert rows(committer.read_rows()) == expected
    assert committer.commits_of_job("nobody") == 0


# --- partition transforms ------------------------------------------------------------------


def timed(n: int, start: int = 0, days: int = 3) -> pa.Table:
    """`n` rows sorted by time, `n // days` a day, several hours each."""
    import datetime as dt

    per_day = n // days
    base = dt.datetime(2024, 3, 1)
    ts = [base + dt.timedelta(days=i // per_day, hours=(i % per_day) % 20) for i in range(n)]
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "value": pa.array([float(i) for i in ids]),
        }
    )


def transformed_table(tmp_path, dest, transform) -> tuple[dict, object]:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, LongType, NestedField, TimestampType

    props = sql_catalog(tmp_path)
    catalog = load_catalog(props["name"], **{k: v for k, v in props.items() if k != "name"})
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "ts", TimestampType()),
        NestedField(3, "value", DoubleType()),
    )
    source = 2 if str(transform) in ("day", "month", "hour") else 1
    spec = PartitionSpec(PartitionField(source, 1000, transform, "p"))
    # no bounds kept for ts: the partition still comes from the footer's own
    metrics = {"write.metadata.metrics.column.ts": "counts"}
    location = f"file://{dest}"
    catalog.create_table(
        "db.tx", schema, location=location, partition_spec=spec, properties=metrics
    )
    return {"catalog": props, "identifier": "db.tx"}, catalog


def test_a_day_transform_gets_each_files_day(tmp_path):
    import datetime as dt

    from pyiceberg.expressions import GreaterThanOrEqual
    from pyiceberg.transforms import DayTransform

    dest = tmp_path / "t"
    options, catalog = transformed_table(tmp_path, dest, DayTransform())
    # files of 40 rows of sorted times: each lies in one day
    dataferry.write_dataset(
        timed(120),
        str(dest),
        committer="iceberg",
        mode="append",
        max_rows_per_file=40,
        committer_options=options,
    )
    tbl = catalog.load_table("db.tx")
    files = tbl.inspect.files().to_pylist()
    assert all(2 not in dict(f["lower_bounds"] or []) for f in files)  # counts only, for ts
    days = sorted(f["partition"]["p"] for f in files)
    assert days == [dt.date(2024, 3, 1), dt.date(2024, 3, 2), dt.date(2024, 3, 3)]
    got = tbl.scan().to_arrow().sort_by("id")
    assert got.column("ts").to_pylist() == timed(120).column("ts").to_pylist()
    # the partition prunes: a scan from the third day plans one file
    after = GreaterThanOrEqual("ts", "2024-03-03T00:00:00")
    assert len(list(tbl.scan(row_filter=after).plan_files())) == 1
    assert tbl.scan(row_filter=after).to_arrow().num_rows == 40


def test_data_spanning_days_is_split_by_day(tmp_path):
    """Without the split by the day transform, the job's one file would hold rows of two
    days: refused at commit (before), or filed under one day and pruned away by a scan."""
    from pyiceberg.transforms import DayTransform

    dest = tmp_path / "t"
    options, catalog = transformed_table(tmp_path, dest, DayTransform())
    dataferry.write_dataset(
        timed(60), str(dest), committer="iceberg", mode="append", committer_options=options
    )
    tbl = catalog.load_table("db.tx")
    assert len(tbl.inspect.files()) == 3  # one file a day
    assert sorted(p.parent.name for p in dest.rglob("*.parquet"))[0] == "p=2024-03-01"
    assert rows_by_id(tbl) == list(range(60))


def test_a_bucket_transform_splits_by_bucket(tmp_path):
    """Each file lies in one bucket, and the manifest names that bucket: were a file filed in
    another bucket, a scan for its ids would prune it away."""
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType

    dest = tmp_path / "t"
    options, catalog = transformed_table(tmp_path, dest, BucketTransform(4))
    dataferry.write_dataset(
        timed(12), str(dest), committer="iceberg", mode="append", committer_options=options
    )
    tbl = catalog.load_table("db.tx")
    bucket = BucketTransform(4).transform(LongType())
    for task in tbl.scan().plan_files():
        ids = pa.parquet.read_table(task.file.file_path.removeprefix("file://"))["id"]
        assert {bucket(i) for i in ids.to_pylist()} == {task.file.partition[0]}
    assert len(tbl.inspect.files()) == len({bucket(i) for i in range(12)})
    assert rows_by_id(tbl) == list(range(12))


def rows_by_id(tbl) -> list[int]:
    return sorted(tbl.scan().to_arrow().column("id").to_pylist())
