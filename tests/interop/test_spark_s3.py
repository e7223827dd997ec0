"""Spark reads the tables dataferry commits on a real S3 server (SeaweedFS,
tests/servers/seaweedfs.py) through Hadoop's S3A (hadoop-aws 3.3.4, Spark 3.5's Hadoop): Delta
and Hudi by path, Iceberg through its JDBC catalog (the SQLite file dataferry's pyiceberg SQL
catalog commits to) with its files on S3.

The S3 twin of tests/interop/test_spark_tables.py: the same sequence (`every_operation`: the
type zoo, partitioned, appended, partitions overwritten, a new column, a killed job rolled back
and one rolled forward by `cleanup_destination`, an overwrite, time travel to each version),
on what S3 changes (the log's, timeline's and manifests' URLs, the listing of partitions, the
files' sizes as S3 reports them, the kills' faults on the S3 store, cleanup's listing there).
"""

from __future__ import annotations

import pytest

from .test_spark_tables import FORMATS, SparkTable, every_operation

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::Warning"),
]


def s3_catalog(spark, seaweed) -> dict[str, str]:
    """Spark's JDBC catalog as pyiceberg opens it, with the S3 server for its FileIO."""
    return {
        **spark.iceberg_catalog,
        "s3.endpoint": seaweed.endpoint,
        "s3.access-key-id": seaweed.key,
        "s3.secret-access-key": seaweed.secret,
        "s3.region": seaweed.region,
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_spark_reads_dataferrys_tables_on_s3(spark_s3, seaweed, fmt, monkeypatch):
    """Broken (a log, timeline or manifest entry naming a file by a URL S3A cannot open, a
    partition directory written unlike the format's, a stat or size unlike the object's), a
    Spark user on S3 gets an error, fewer rows, or other values than were written; a killed
    job's recovery broken on S3, its objects stay (billed), Hudi's time travel fails on its
    pending instant, or its transaction is made twice."""
    # hudi-rs 0.5 opens the timeline with the storage options it is given but reads base files
    # at the environment's endpoint: keep that one this server (another test's server may have
    # set it in this worker)
    monkeypatch.setenv("AWS_ENDPOINT_URL", seaweed.endpoint)
    table = SparkTable(
        fmt,
        f"{seaweed.url()}/zoo_s3_{fmt}",  # a name of its own in the run's catalog
        spark_s3,
        storage_options=seaweed.storage_options,
        catalog=s3_catalog(spark_s3, seaweed),
    )
    every_operation(table, " on S3")
