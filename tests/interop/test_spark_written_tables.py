"""dataferry writes into tables Spark created and wrote, with each format's reference
implementation (Delta Lake 3.3; Iceberg 1.10 through its JDBC catalog on the SQLite file that
dataferry's pyiceberg SQL catalog then commits to; Hudi 0.15, copy-on-write with a record key
and a precombine field), and Spark reads the result row for row.

The rows dataferry writes are the rows Spark wrote, as Spark hands them over in Arrow (so
their types are Spark's), with new ids: a schema Spark made, written back exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dataferry

from .test_spark_tables import assert_same

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::Warning"),
]

# Spark's own rows: most of Spark's types, a null in each nullable column
SPARK_ROWS = """
SELECT id, CAST(id % 2 AS STRING) AS part, CAST(id AS DOUBLE) / 2 AS v,
       timestamp_micros(1711840507123456 + id * 3600000001) AS ts,
       date_add(DATE'2024-03-30', CAST(id AS INT)) AS d,
       CAST(id * 1.01 AS DECIMAL(10, 2)) AS dec,
       IF(id = 1, NULL, CONCAT('s', id)) AS s,
       IF(id = 2, NULL, array(id, id + 1)) AS lst,
       named_struct('a', id, 'b', CONCAT('b', id)) AS st,
       map('k', id) AS mp
FROM range(0, 6)
"""


def with_ids(rows: pa.Table, start: int) -> pa.Table:
    """Spark's rows again, ids from `start` (and `v` changed, to see an update)."""
    n = rows.num_rows
    ids = pa.array(range(start, start + n), pa.int64())
    out = rows.set_column(rows.schema.get_field_index("id"), "id", ids)
    v = pc.add(out.column("v"), 100.0)
    return out.set_column(out.schema.get_field_index("v"), "v", v)


def spark_write(spark, code: str, **variables: Any) -> None:
    spark.run(f"df = spark.sql(rows)\n{code}", rows=SPARK_ROWS, **variables)


def test_dataferry_appends_to_and_overwrites_a_delta_table_spark_wrote(spark, tmp_path):
    """Broken (dataferry misreading Spark's protocol, schema or partitioning, or its commit
    unreadable to Spark), the append is refused, or Spark reads other rows than were written."""
    dest = tmp_path / "spark_delta"
    spark_write(spark, "df.write.format('delta').partitionBy('part').save(path)", path=str(dest))
    first = spark.read("delta", dest)
    added = with_ids(first, 100)
    dataferry.write_deltalake(str(dest), added, mode="append", partition_by=["part"])
    assert_same(spark.read("delta", dest), pa.concat_tables([first, added]), "delta append")
    again = with_ids(first, 200)
    dataferry.write_deltalake(str(dest), again, mode="overwrite", partition_by=["part"])
    assert_same(spark.read("delta", dest), again, "delta overwrite")


def test_dataferry_appends_to_and_overwrites_an_iceberg_table_spark_wrote(spark, tmp_path):
    """Broken (dataferry's SQL catalog and Iceberg Java's JDBC catalog disagreeing on the
    shared catalog, or dataferry's snapshot unreadable to Java), the append fails or Spark reads
    other rows."""
    from pyiceberg.catalog import load_catalog

    name = f"default.spark_written_{tmp_path.name[-12:].replace('-', '_')}"
    table = f"dataferry.{name}"
    spark.run("spark.sql('CREATE NAMESPACE IF NOT EXISTS dataferry.default')")
    spark_write(
        spark,
        "df.writeTo(name).using('iceberg').partitionedBy(df.part).create()",
        name=table,
    )
    first = spark.sql(f"SELECT * FROM {table}")
    props = dict(spark.iceberg_catalog)
    location = load_catalog(props.pop("name"), **props).load_table(name).location()
    dest = location.removeprefix("file://")
    options = {"catalog": spark.iceberg_catalog, "identifier": name}
    added = with_ids(first, 100)
    dataferry.write_dataset(
        added,
        dest,
        committer="iceberg",
        mode="append",
        partition_by=["part"],
        committer_options=options,
    )
    assert_same(spark.sql(f"SELECT * FROM {table}"), pa.concat_tables([first, added]), "append")
    again = with_ids(first, 200)
    dataferry.write_dataset(
        again,
        dest,
        committer="iceberg",
        mode="overwrite",
        partition_by=["part"],
        committer_options=options,
    )
    assert_same(spark.sql(f"SELECT * FROM {table}"), again, "iceberg overwrite")


HUDI_OPTIONS = {
    "hoodie.table.name": "spark_hudi",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "v",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.datasource.write.hive_style_partitioning": "true",
    "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
    "hoodie.datasource.write.operation": "upsert",
}


def hudi_write(spark, dest: Path, **extra: str) -> None:
    code = "df.write.format('hudi').options(**options).mode('overwrite').save(path)"
    spark_write(spark, code, options={**HUDI_OPTIONS, **extra}, path=str(dest))


def test_dataferry_upserts_into_a_hudi_table_spark_wrote(spark, tmp_path):
    """Spark writes a copy-on-write table (record key `id`, precombine `v`, the metadata table
    off); dataferry upserts rows of which half update Spark's keys, Spark reads every key once
    with the newer version. Broken, Spark reads duplicates, the old versions, or nothing."""
    dest = tmp_path / "spark_hudi"
    hudi_write(spark, dest, **{"hoodie.metadata.enable": "false"})
    first = spark.read("hudi", dest)
    columns = [c for c in first.column_names if not c.startswith("_hoodie_")]
    first = first.select(columns).sort_by("id")  # ids 3..5 keep their partitions below
    updates = with_ids(first.slice(3), 3)  # ids 3..5 again, with a greater v
    inserts = with_ids(first.slice(0, 2), 100)
    dataferry.write_dataset(
        pa.concat_tables([updates, inserts], promote_options="permissive"),
        str(dest),
        committer="hudi",
        mode="append",
        partition_by=["part"],
        committer_options={"record_key": ["id"], "precombine_field": "v"},
    )
    want = pa.concat_tables([first.slice(0, 3), updates, inserts], promote_options="permissive")
    got = spark.read("hudi", dest)
    assert_same(got, want, "hudi upsert")


def test_dataferry_appends_to_a_hudi_table_with_sparks_metadata_table(spark, tmp_path):
    """Spark's Hudi writes a metadata table by default (its `files` partition, HFile blocks),
    which lists the table's files for Hudi's readers; dataferry adds its files there in each
    commit. Broken (dataferry committing without it), Spark's readers list files from the
    metadata table and miss dataferry's rows."""
    dest = tmp_path / "spark_hudi_mdt"
    hudi_write(spark, dest)
    first = spark.read("hudi", dest, **{"hoodie.metadata.enable": "true"})
    rows = first.select([c for c in first.column_names if not c.startswith("_hoodie_")])
    added = with_ids(rows, 100)
    dataferry.write_dataset(
        added,
        str(dest),
        committer="hudi",
        mode="append",
        partition_by=["part"],
        committer_options={"record_key": ["id"], "precombine_field": "v"},
    )
    got = spark.read("hudi", dest, **{"hoodie.metadata.enable": "true"})
    assert_same(got, pa.concat_tables([rows, added], promote_options="permissive"), "append")


# Spark's writer without the metadata table (it deletes dataferry's), or with it and its
# column statistics (it appends HFile blocks to dataferry's file groups and compacts them)
WRITER_METADATA = {
    "off": {"hoodie.metadata.enable": "false"},
    "on": {
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.compact.max.delta.commits": "2",
    },
}


@pytest.mark.parametrize("metadata", sorted(WRITER_METADATA))
def test_hudis_writer_and_table_services_run_on_a_dataferry_table(spark, tmp_path, metadata):
    """dataferry commits twice (a killed job between, rolled back by `dataferry cleanup`);
    Spark's Hudi writer then upserts three times with cleaning and timeline archiving set to
    run at once (with the metadata table: updating dataferry's and compacting it); dataferry
    appends again. Broken (a timeline, properties, partition layout or metadata table Java
    Hudi cannot work with), Spark's write fails in its table services, or a reader afterwards
    loses or duplicates rows."""
    from dataferry.commit.job.cleanup import cleanup_destination
    from dataferry.commit.lookup import committer_by_name
    from dataferry.errors import InjectedCrash
    from dataferry.store import FaultRule, open_store

    dest = tmp_path / "dataferry_hudi"
    options = {"record_key": ["id"], "precombine_field": "v"}

    def rows(start: int) -> pa.Table:
        ids = list(range(start, start + 4))
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "part": [f"p{i % 2}" for i in ids],
                "v": [float(i) for i in ids],
            }
        )

    def write(data: pa.Table, store: Any = None) -> None:
        dataferry.write_dataset(
            data, store or str(dest), committer="hudi", mode="append", partition_by=["part"],
            committer_options=options, progress=False,
        )  # fmt: skip

    write(rows(0))
    rule = FaultRule(action="crash", when="before", path_glob="*_commit_intent.json")
    with pytest.raises(InjectedCrash):
        write(rows(10), open_store(str(dest), faults=[rule]))
    assert not cleanup_destination(open_store(str(dest)), older_than_s=0).failed
    write(rows(20))
    services = {
        **HUDI_OPTIONS,
        "hoodie.table.name": "dataferry_hudi",
        **WRITER_METADATA[metadata],
        "hoodie.clean.automatic": "true",
        "hoodie.cleaner.commits.retained": "1",
        "hoodie.archive.automatic": "true",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    code = """
for i, key in enumerate((1, 101, 201)):
    df = spark.createDataFrame([(key, 'p1', 50.0 + i)], 'id long, part string, v double')
    df.write.format('hudi').options(**options).mode('append').save(path)
"""
    spark.run(code, options=services, path=str(dest))
    hoodie = dest / ".hoodie"
    assert list(hoodie.glob("*.clean")), "Hudi's cleaner did not run"
    assert any((hoodie / "archived").iterdir()), "Hudi did not archive the timeline"
    write(rows(30))
    want = {i: float(i) for i in (0, 2, 3, 20, 21, 22, 23, 30, 31, 32, 33)}
    want.update({1: 50.0, 101: 51.0, 201: 52.0})
    for reader, got in (
        ("Spark", spark.read("hudi", dest, **WRITER_METADATA[metadata])),
        ("dataferry", committer_by_name("hudi", open_store(str(dest))).read_rows()),
    ):
        pairs = list(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True))
        assert sorted(pairs) == sorted(want.items()), reader
    if metadata == "on":
        assert list((dest / ".hoodie/metadata/.hoodie").glob("*.commit")), "no compaction ran"
        skipping = {**WRITER_METADATA[metadata], "hoodie.enable.data.skipping": "true"}
        got = spark.read("hudi", dest, **skipping).filter(pc.field("v") >= 30.0)
        assert sorted(got.column("id").to_pylist()) == [1, 30, 31, 32, 33, 101, 201]
