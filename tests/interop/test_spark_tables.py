"""Spark, with each format's reference implementation (Delta Lake 3.3, Iceberg 1.10 through its
JDBC catalog on the SQLite file pyiceberg's SQL catalog uses, Hudi 0.15), reads every table
dataferry commits, value for value: the type-zoo frame (`dataferry.verify.type_zoo`),
partitioned and not, after an append, an overwrite of partitions, a schema evolution, a
killed job rolled back and one rolled forward by `dataferry cleanup`, and an overwrite; Spark's
rows equal the format's Python reader's (deltalake, pyiceberg, hudi-rs) and the input's, as
the referee compares them (`zoo_files.canonical`); then every version again by time travel.
Spark's data skipping on them: tests/interop/test_spark_skipping.py.

One table per format goes through all the operations (each read after it), so the Spark
work stays small; the JVM is the run's one (tests/servers/spark.py). The sequence is one
function, `every_operation`, which tests/interop/test_spark_s3.py runs on S3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, open_store
from dataferry.verify.tables import TableView, orphans
from dataferry.verify.type_zoo import type_zoo
from dataferry.verify.zoo_files import canonical

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::Warning"),
]

FORMATS = ("delta", "iceberg", "hudi")
_COMPLETED = re.compile(r"(?:^|/)(\d{17})\.(commit|replacecommit)$")
_DELTA_LOG = re.compile(r"(?:^|/)(\d{20})\.json$")


def assert_same(got: pa.Table, want: pa.Table, what: str) -> None:
    """`got` holds `want`'s rows (by id) with the same values in every column of `want`."""
    got, want = got.sort_by("id"), want.sort_by("id")
    assert got.column("id").to_pylist() == want.column("id").to_pylist(), f"{what}: rows differ"
    for name in want.column_names:
        assert name in got.column_names, f"{what}: column {name!r} is missing"
        g, w = canonical(got.column(name)), canonical(want.column(name))
        for i, (a, b) in enumerate(zip(g, w, strict=True)):
            assert a == b, f"{what}: column {name!r} row {i}: read {a!r}, written {b!r}"


@dataclass
class SparkTable:
    """One format's table, written by dataferry, read by Spark and by the Python reader."""

    fmt: str
    dest: Path | str  # a local path, or an s3:// URL (opened with `storage_options`)
    spark: Any
    partition_by: tuple[str, ...] = ("part",)
    versions: list[tuple[Any, pa.Table]] = field(default_factory=list)
    storage_options: dict[str, Any] | None = None
    catalog: dict[str, str] | None = None  # Iceberg: Spark's JDBC catalog unless given

    @property
    def name(self) -> str:
        return f"default.{str(self.dest).rstrip('/').rsplit('/', 1)[-1]}"

    @property
    def spark_path(self) -> str:
        """Where Spark finds it: on S3 through S3A."""
        dest = str(self.dest)
        return "s3a://" + dest.removeprefix("s3://") if dest.startswith("s3://") else dest

    def store(self, faults=()) -> Any:
        return open_store(str(self.dest), storage_options=self.storage_options, faults=faults)

    def options(self) -> dict[str, Any]:
        if self.fmt == "iceberg":
            catalog = self.catalog or self.spark.iceberg_catalog
            return {"catalog": catalog, "identifier": self.name}
        if self.fmt == "hudi":
            return {"record_key": ["id"]}
        return {}

    def write(self, data: pa.Table, mode: str, faults=(), **kw) -> None:
        dataferry.write_dataset(
            data,
            self.store(list(faults)),
            partition_by=list(self.partition_by),
            committer=self.fmt,
            mode=mode,
            committer_options=self.options(),
            progress=False,
            **kw,
        )

    def spark_read(self, version: Any = None) -> pa.Table:
        if self.fmt == "iceberg":
            at = {} if version is None else {"snapshot-id": str(version)}
            code = "result = spark.read.options(**at).table(name)"
            return self.spark.run(code, at=at, name=f"dataferry.{self.name}")
        # Hudi's reader lists the files from the metadata table dataferry keeps
        listing = {"hoodie.metadata.enable": "true"} if self.fmt == "hudi" else {}
        if version is None:
            return self.spark.read(self.fmt, self.spark_path, **listing)
        key = "versionAsOf" if self.fmt == "delta" else "as.of.instant"
        return self.spark.read(self.fmt, self.spark_path, **{key: str(version)}, **listing)

    def python_read(self) -> pa.Table:
        return committer_by_name(self.fmt, self.store()).read_rows()

    def orphans(self) -> list[str]:
        """Data files in the table's storage no version references (a dead job's files)."""
        referenced = committer_by_name(self.fmt, self.store()).referenced_files()
        return orphans(self.store(), TableView(referenced=referenced))

    def latest_version(self) -> Any:
        if self.fmt == "iceberg":
            query = f"SELECT snapshot_id FROM dataferry.{self.name}.refs WHERE name = 'main'"
            return self.spark.sql(query).column(0)[0].as_py()
        if self.fmt == "delta":
            logs = self.store().list("_delta_log")
            return max(int(m.group(1)) for s in logs if (m := _DELTA_LOG.search(s.path)))
        found = [
            m.group(1) for s in self.store().list(".hoodie") if (m := _COMPLETED.search(s.path))
        ]
        return max(found)

    def check(self, want: pa.Table, step: str, new_version: bool = True) -> None:
        """Spark's read and the Python reader's both equal `want`; the version is kept."""
        assert_same(self.spark_read(), want, f"{self.fmt} after {step}: Spark")
        assert_same(
            self.python_read(), want, f"{self.fmt} after {step}: {self.fmt}'s Python reader"
        )
        if new_version:
            self.versions.append((self.latest_version(), want))


def replace_partitions(old: pa.Table, new: pa.Table) -> pa.Table:
    kept = old.filter(
        pc.invert(pc.is_in(old.column("part"), value_set=new.column("part").unique()))
    )
    return pa.concat_tables([kept, new], promote_options="default")


def crash(when: str, **kinds: Any) -> FaultRule:
    return FaultRule(action="crash", when=when, **kinds)


def every_operation(table: SparkTable, where: str = "") -> None:
    """The sequence each format's table goes through, on local disk and on S3 (`where`
    names the store in the messages): the type zoo appended (the table created), partitions
    overwritten, a new column (schema evolution), a job killed before its commit was decided
    rolled back by `cleanup_destination`, one killed just after its transaction landed rolled
    forward by it, an overwrite; Spark and the Python reader read each version, then Spark
    every version again by time travel. The kills are `FaultRule`s on the table's own store."""
    fmt = table.fmt
    zoo = type_zoo()
    table.write(zoo, "append")
    table.check(zoo, f"a first append{where} (the table created)")

    fresh = type_zoo(4, start=100)  # partitions a and b
    want = replace_partitions(zoo, fresh)
    table.write(fresh, "overwrite-partitions")
    table.check(want, f"an overwrite of partitions a and b{where}")

    wider = type_zoo(4, start=200).append_column("extra", pa.array([1, None, 3, 4], pa.int64()))
    want = pa.concat_tables([want, wider], promote_options="default")
    table.write(wider, "append", **({} if fmt == "hudi" else {"schema_mode": "merge"}))
    table.check(want, f"a schema evolution (a new column){where}")

    dead = wider.set_column(0, "id", pa.array(range(300, 304), pa.int64()))
    with pytest.raises(InjectedCrash):  # killed before its commit was decided
        table.write(dead, "append", faults=[crash("before", path_glob="*_commit_intent.json")])
    report = cleanup_destination(table.store(), older_than_s=0)
    assert report.rolled_back and not report.failed, report
    assert not table.orphans(), f"{fmt}{where}: the rolled-back job's files are left"
    table.check(want, f"a killed job rolled back by cleanup{where}", new_version=False)

    late = wider.set_column(0, "id", pa.array(range(400, 404), pa.int64()))
    with pytest.raises(InjectedCrash):  # killed just after its transaction landed
        table.write(late, "append", faults=[crash("after", kinds=frozenset({Op.TABLE_COMMIT}))])
    report = cleanup_destination(table.store(), older_than_s=0)
    assert report.rolled_forward and not report.failed, report
    assert not table.orphans(), f"{fmt}{where}: the rolled-forward job left files"
    want = pa.concat_tables([want, late])
    table.check(want, f"a killed job rolled forward by cleanup{where}")

    last = wider.set_column(0, "id", pa.array(range(500, 504), pa.int64()))
    table.write(last, "overwrite")
    table.check(last, f"an overwrite{where}")

    assert len({v for v, _ in table.versions}) == len(table.versions)
    for version, rows in table.versions:
        assert_same(table.spark_read(version), rows, f"{fmt}{where} time travel to {version}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_spark_reads_every_version_dataferry_commits(spark, tmp_path, fmt):
    """Broken (a stat, a partition value, a type, a timeline file or the catalog's row
    written unlike the format's reference implementation), Spark, Trino or Databricks users
    read other values than were written, fewer rows, or nothing, or the table fails to open;
    a killed job's recovery broken, its files stay (billed, read by anyone reading the files),
    Hudi's time travel fails on its pending instant, or its transaction is made twice."""
    every_operation(SparkTable(fmt, tmp_path / f"zoo_{fmt}", spark))


@pytest.mark.parametrize("fmt", FORMATS)
def test_spark_reads_an_unpartitioned_table(spark, tmp_path, fmt):
    """Broken (a table without partitions laid out or described unlike the format's own), a
    Spark user reads nothing or other values."""
    table = SparkTable(fmt, tmp_path / f"flat_{fmt}", spark, partition_by=())
    first, second = type_zoo(6), type_zoo(6, start=6)
    table.write(first, "append")
    table.write(second, "append")
    table.check(pa.concat_tables([first, second]), "two appends")
    table.write(second, "overwrite")
    table.check(second, "an overwrite")
