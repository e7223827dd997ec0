"""Spark's own S3A committers on a real S3 server (SeaweedFS), beside dataferry.

The session Spark (tests/servers/spark.py: Spark 3.5, whose Hadoop client is 3.3.4) loads set
`spark` of deps/maven.txt, with hadoop-aws 3.3.4, its AWS SDK bundle and Spark's cloud module,
whose `PathOutputCommitProtocol` hands a DataFrame write to the committer S3A's factory picks
(`fs.s3a.committer.name`). Everything S3A needs is set in the request's own Spark session (its
SQL settings reach the write's Hadoop configuration), so no other test's Spark sees it.

Shown here: a DataFrame written through S3A's magic and directory committers is read by
dataferry, and dataferry's parser reads the `_SUCCESS` S3A's job commit wrote; a Spark job that
failed after a task committed, with `fs.s3a.committer.abort.pending.uploads=false` (what a
destination shared by several jobs needs), leaves that task's uploads pending: `dataferry
uploads list` shows them and `dataferry cleanup` aborts them, nothing of them visible.

The staging committers (`directory`, `partitioned`) keep their pendingsets on the cluster file
system (`fs.s3a.committer.staging.tmp.path`, `file:` for a local Spark), not the bucket: a
failed Spark job's abort reads them back and aborts their uploads itself, so nothing is left;
a driver that died after a task commit (Hadoop's committer driven through the calls Spark's
commit protocol makes, up to `commitTask`) leaves the upload pending on the bucket, which
`dataferry uploads list` shows and `dataferry cleanup` aborts, and the pendingset where
dataferry cannot see it.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from dataferry.cli import app
from dataferry.commit.records.success import SuccessData
from dataferry.store import open_store
from tests.servers.spark import JARS

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.filterwarnings("ignore::Warning")]

ROWS = 6
WRITE = """
for key, value in conf.items():
    spark.conf.set(key, value)
df = spark.range(0, rows, 1, 2).selectExpr("id", "concat('v', cast(id as string)) AS s")
if fail_second_task:  # the second task waits for the first to commit, then fails
    df = df.selectExpr(
        "id",
        f"IF(id < {rows // 2}, s, IF(length(reflect('java.lang.Thread', 'sleep', "
        f"CAST({wait_ms} AS BIGINT))) > 0, CAST(raise_error('stopped before job commit') "
        "AS STRING), s)) AS s",
    )
df.write.parquet(dest)
"""
# what Spark's commit protocol asks of a staging committer up to a task commit (the driver's
# setupJob, the task's setupTask, its file in the task's local work path, commitTask); the
# driver dies there: neither commitJob nor abortJob ever runs
STAGED = """
import os
import pyarrow as pa, pyarrow.parquet as pq
hadoop = spark._jvm.org.apache.hadoop
conf = hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
for key, value in settings.items():
    conf.set(key, value)
attempt = hadoop.mapreduce.TaskAttemptID.forName("attempt_202612070000_0007_m_000000_0")
task = hadoop.mapreduce.task.TaskAttemptContextImpl(conf, attempt)
job = hadoop.mapreduce.task.JobContextImpl(conf, attempt.getJobID())
staging = hadoop.fs.s3a.commit.staging
kind = {"directory": staging.DirectoryStagingCommitter, "partitioned": staging.PartitionedStagingCommitter}
committer = kind[name](hadoop.fs.Path(dest), task)
committer.setupJob(job)
committer.setupTask(task)
local = os.path.join(committer.getWorkPath().toUri().getPath(), "part=a", "part-00000.parquet")
os.makedirs(os.path.dirname(local), exist_ok=True)
pq.write_table(pa.table({"id": list(range(rows))}), local)
committer.commitTask(task)
committer.getDestFS().close()  # uncached (fs.s3a.impl.disable.cache): its threads
"""


def s3a_conf(seaweed, committer: str, tmp: str) -> dict[str, str]:
    """S3A on the test server with `committer`, for one Spark session's writes."""
    return {
        "spark.sql.sources.commitProtocolClass": (
            "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol"
        ),
        "spark.sql.parquet.output.committer.class": (
            "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter"
        ),
        "mapreduce.outputcommitter.factory.scheme.s3a": (
            "org.apache.hadoop.fs.s3a.commit.S3ACommitterFactory"
        ),
        "fs.s3a.committer.name": committer,
        "fs.s3a.committer.magic.enabled": "true",
        "fs.s3a.committer.abort.pending.uploads": "false",
        "fs.s3a.committer.staging.tmp.path": f"file://{tmp}/staging",
        "fs.s3a.buffer.dir": f"{tmp}/buffer",
        "fs.s3a.endpoint": seaweed.endpoint,
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": seaweed.key,
        "fs.s3a.secret.key": seaweed.secret,
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "fs.s3a.impl.disable.cache": "true",
    }


@pytest.fixture(scope="module")
def spark_s3a(spark, seaweed, tmp_path_factory):
    """The session Spark, with S3A (skipped where Spark's cloud module is not fetched)."""
    if not list(JARS.glob("spark-hadoop-cloud*.jar")):
        pytest.skip("hadoop-aws for Spark is not fetched: `make jars` (deps/maven.txt, set spark)")
    return spark


def spark_write(spark, seaweed, tmp_path, dest: str, committer: str, fail: bool = False) -> None:
    """Spark writes `ROWS` rows in two tasks to `dest` (s3://) through S3A's `committer`."""
    spark.run(
        WRITE,
        conf=s3a_conf(seaweed, committer, str(tmp_path)),
        rows=ROWS,
        dest="s3a://" + dest.split("://", 1)[1],
        fail_second_task=fail,
        wait_ms=4000,
    )


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_dataferry_reads_what_sparks_s3a_committer_committed(
    spark_s3a, seaweed, tmp_path, committer
):
    """Spark's job, committed by S3A's committer: dataferry reads every row, and the
    `_SUCCESS` S3A wrote (naming the committer and every file) through its own parser. Were
    dataferry's `_SUCCESS` reader to drift from S3A's shape, a job waiting on Spark's output
    would never see it as done."""
    dest = seaweed.url()
    spark_write(spark_s3a, seaweed, tmp_path, dest, committer)
    store = open_store(dest, storage_options=seaweed.storage_options)
    success = SuccessData.from_bytes(store.read_bytes("_SUCCESS"), store.full_url("_SUCCESS"))
    assert success.committer == committer  # S3A 3.3 names its committer so
    parts = sorted(s.path for s in store.walk("") if s.path.endswith(".parquet"))
    assert len(parts) == 2
    prefix = dest.split("://", 1)[1].split("/", 1)[1]  # S3A names each file `/<key>`
    assert sorted(success.filenames) == [f"/{prefix}/{p}" for p in parts]
    rows = []
    for p in parts:
        with store.open_read(p) as f:
            rows += pq.read_table(f).to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(ROWS))
    assert store.list_uploads("") == []


def test_uploads_of_a_spark_job_that_stopped_before_job_commit(spark_s3a, seaweed, tmp_path):
    """A Spark job whose first task committed (magic committer: its files are pending
    uploads, billed and invisible) and whose second failed, so job commit never ran: `dataferry
    uploads list` names the first task's file, `dataferry cleanup` aborts it, and no row of the
    job ever becomes visible. Broken, a Spark job's leftovers would be billed for ever."""
    dest = seaweed.url()
    with pytest.raises(AssertionError, match="stopped before job commit"):
        spark_write(spark_s3a, seaweed, tmp_path, dest, "magic", fail=True)
    store = open_store(dest, storage_options=seaweed.storage_options)
    runner = CliRunner()
    listed = runner.invoke(app, ["uploads", "list", dest, "--json"], env=seaweed.env)
    assert listed.exit_code == 0, listed.output
    keys = [u["path"] for u in json.loads(listed.output)]
    assert len(keys) == 1 and keys[0].startswith("part-00000-"), keys
    assert not [s.path for s in store.walk("") if s.path.endswith(".parquet")]
    cleaned = runner.invoke(app, ["cleanup", dest, "--older-than", "0s", "--json"], env=seaweed.env)
    assert cleaned.exit_code == 0, cleaned.output
    assert json.loads(cleaned.output)["uploads_aborted"] == keys
    assert store.list_uploads("") == []
    assert not [s.path for s in store.walk("") if s.path.endswith(".parquet")]


def staged_pendingsets(tmp_path) -> list:
    """The pendingsets a staging committer's task commits saved in its cluster file system
    (`fs.s3a.committer.staging.tmp.path`, here under `tmp_path`): its wrapped
    FileOutputCommitter keeps each as `<user>/<job uuid>/staging-uploads/_temporary/0/<task id>`."""
    found = (tmp_path / "staging").rglob("task_*")
    return [p for p in found if p.is_file()]


def test_a_failed_spark_job_with_a_staging_committer_aborts_its_uploads(
    spark_s3a, seaweed, tmp_path
):
    """A Spark job whose first task committed through S3A's `directory` committer (seen: its
    pendingset in the committer's cluster file system, its upload pending on the bucket) and
    whose second failed: Spark's job abort runs the staging committer's, which reads the
    pendingsets back and aborts their uploads, whatever `fs.s3a.committer.abort.pending.uploads`
    says (unlike the magic committer's). `dataferry uploads list` then finds nothing and
    `dataferry cleanup` does nothing. Were Hadoop to leave them, docs/protocols.md would
    wrongly tell staging committers' users that a failed job leaves nothing to clean up."""
    dest = seaweed.url()
    store = open_store(dest, storage_options=seaweed.storage_options)
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(spark_write, spark_s3a, seaweed, tmp_path, dest, "directory", True)
        while not staged_pendingsets(tmp_path) and not job.done():
            time.sleep(0.05)
        committed = store.list_uploads("")  # the second task is still waiting to fail
        with pytest.raises(AssertionError, match="stopped before job commit"):
            job.result()
    assert len(committed) == 1 and committed[0].path.startswith("part-00000-"), committed
    runner = CliRunner()
    listed = runner.invoke(app, ["uploads", "list", dest, "--json"], env=seaweed.env)
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output) == []
    assert not staged_pendingsets(tmp_path)  # the job's abort deleted them too
    assert not list(store.walk(""))
    cleaned = runner.invoke(app, ["cleanup", dest, "--older-than", "0s", "--json"], env=seaweed.env)
    assert cleaned.exit_code == 0, cleaned.output
    assert json.loads(cleaned.output)["uploads_aborted"] == []


@pytest.mark.parametrize("committer", ["directory", "partitioned"])
def test_uploads_of_a_staging_committers_job_whose_driver_died(
    spark_s3a, seaweed, tmp_path, committer
):
    """A job whose task committed through S3A's staging `committer` (one file of a few rows:
    its upload pending on the bucket, its pendingset on the committer's cluster file system,
    here `file:`) and whose driver died before job commit or abort. `dataferry uploads list`
    names the upload the pendingset names, `dataferry cleanup` aborts it (an upload no job of
    dataferry's names) and nothing of the job is ever visible; the pendingset stays where
    dataferry cannot look (the cluster file system). Broken, such a job's upload would be
    billed for ever, or a dead job's file could appear in the destination."""
    dest = seaweed.url()
    settings = s3a_conf(seaweed, committer, str(tmp_path))
    spark_s3a.run(
        STAGED, settings=settings, dest="s3a://" + dest.split("://", 1)[1], name=committer, rows=3
    )
    pendingsets = staged_pendingsets(tmp_path)
    assert len(pendingsets) == 1, pendingsets
    (commit,) = json.loads(pendingsets[0].read_text())["commits"]
    runner = CliRunner()
    listed = runner.invoke(app, ["uploads", "list", dest, "--json"], env=seaweed.env)
    assert listed.exit_code == 0, listed.output
    uploads = json.loads(listed.output)
    assert [(u["path"], u["upload_id"]) for u in uploads] == [
        (commit["destinationKey"].split("/", 1)[1], commit["uploadId"])
    ]
    assert uploads[0]["path"].startswith("part=a/part-00000")
    store = open_store(dest, storage_options=seaweed.storage_options)
    assert not list(store.walk(""))
    cleaned = runner.invoke(app, ["cleanup", dest, "--older-than", "0s", "--json"], env=seaweed.env)
    assert cleaned.exit_code == 0, cleaned.output
    assert json.loads(cleaned.output)["uploads_aborted"] == [uploads[0]["path"]]
    assert store.list_uploads("") == []
    assert not list(store.walk(""))
    assert pendingsets[0].exists()  # on the cluster file system: not dataferry's to see
