"""Spark's Iceberg (1.10) through an Iceberg REST catalog: SeaweedFS's, over its S3 Tables
table bucket (tests/servers/iceberg_rest.py), signed with SigV4 under the service name
`s3tables` as S3 Tables users sign (`rest.sigv4-enabled`, iceberg-aws-bundle), its files through
Iceberg's S3FileIO. Spark reads a table dataferry commits through the catalog, and dataferry
appends to and overwrites a table Spark created there; each side reads every row of both.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.store import open_store
from dataferry.verify.type_zoo import type_zoo

from .test_spark_tables import assert_same
from .test_spark_written_tables import SPARK_ROWS, with_ids

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::Warning"),
]

CATALOG = "rest"  # Spark's name for the REST catalog (set per request: a session each)
USE_REST = "for k, v in rest_conf.items():\n    spark.conf.set(k, v)\n"


def rest_conf(rest: Any) -> dict[str, str]:
    """Spark's catalog properties for the REST catalog `rest` (SigV4 with the server's keys)."""
    s, prefix = rest.server, f"spark.sql.catalog.{CATALOG}"
    props = {
        "type": "rest",
        "uri": rest.uri,
        "warehouse": rest.warehouse,
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": s.region,
        "rest.access-key-id": s.key,
        "rest.secret-access-key": s.secret,
        "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": s.endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": s.key,
        "s3.secret-access-key": s.secret,
        "client.region": s.region,
        "cache-enabled": "false",  # dataferry commits between Spark's reads
    }
    return {prefix: "org.apache.iceberg.spark.SparkCatalog"} | {
        f"{prefix}.{k}": v for k, v in props.items()
    }


def run(spark, rest, code: str, **variables: Any) -> Any:
    """`code` in the Spark process with the REST catalog configured in its session."""
    return spark.run(USE_REST + code, rest_conf=rest_conf(rest), **variables)


def write(rest, url: str, ident: str, data: pa.Table, mode: str = "append", **kw) -> None:
    dataferry.write_dataset(
        data,
        url,
        committer="iceberg",
        mode=mode,
        storage_options=rest.storage_options,
        committer_options={"catalog": rest.properties(), "identifier": ident},
        **kw,
    )


def python_read(rest, url: str) -> pa.Table:
    return committer_by_name(
        "iceberg", open_store(url, storage_options=rest.storage_options)
    ).read_rows()


def test_spark_reads_through_the_rest_catalog_what_dataferry_commits(spark, iceberg_rest):
    """Broken (dataferry's commit not made through the catalog, or its metadata or files
    unreadable to Iceberg Java on S3), Spark's REST catalog users see no table, an older
    snapshot, or other values than were written."""
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    first, second = type_zoo(), type_zoo(6, start=100)
    write(iceberg_rest, url, ident, first, partition_by=["part"])
    write(iceberg_rest, url, ident, second, partition_by=["part"])
    want = pa.concat_tables([first, second])
    read = "result = spark.table(name)"
    name = f"{CATALOG}.{ident}"
    assert_same(run(spark, iceberg_rest, read, name=name), want, "Spark through REST")
    assert_same(python_read(iceberg_rest, url), want, "pyiceberg through REST")
    snapshots = iceberg_rest.catalog().load_table(ident).snapshots()
    assert len(snapshots) == 2
    code = "result = spark.read.option('snapshot-id', snap).table(name)"
    old = run(spark, iceberg_rest, code, name=name, snap=str(snapshots[0].snapshot_id))
    assert_same(old, first, "Spark through REST, time travel to the first snapshot")


def test_dataferry_appends_to_a_table_spark_created_through_the_rest_catalog(spark, iceberg_rest):
    """Broken (dataferry committing beside the catalog's table, with other field ids or
    another partition spec than Spark's), the append is refused, or Spark reads other rows."""
    ident = iceberg_rest.identifier()
    name = f"{CATALOG}.{ident}"
    create = """
spark.sql(f"CREATE TABLE {name} USING iceberg PARTITIONED BY (part) AS {rows}")
result = spark.table(name)
"""
    first = run(spark, iceberg_rest, create, name=name, rows=SPARK_ROWS)
    url = iceberg_rest.catalog().load_table(ident).metadata.location
    added = with_ids(first, 100)
    write(iceberg_rest, url, ident, added, partition_by=["part"])
    read = "result = spark.table(name)"
    want = pa.concat_tables([first, added])
    assert_same(run(spark, iceberg_rest, read, name=name), want, "Spark after dataferry's append")
    again = with_ids(first, 200)
    write(iceberg_rest, url, ident, again, mode="overwrite", partition_by=["part"])
    assert_same(run(spark, iceberg_rest, read, name=name), again, "Spark after an overwrite")
