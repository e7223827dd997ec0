"""A local Spark with Delta Lake, Iceberg and Hudi, started once per test run (per xdist
worker; the Spark test modules are grouped on one with `xdist_group("spark")`).

Spark 3.5 is the one Spark line for which the three formats publish bundles on Maven Central
(deps/maven.txt, set `spark`: Hudi's Spark 4 bundle is not there). Its pyspark (pinned in
deps/spark-python.txt) is installed by `make servers` into .cache/spark/python, apart from the
virtualenv's pyspark 4 (whose Hadoop the manifest committer's interop tests need), so Spark
runs in a process of its own: tests/servers/spark_worker.py, driven through `Spark.run`.

The session: `local[2]`, 1 GB for the driver, no UI, two shuffle partitions, the time zone
UTC, the three formats' extensions; `spark_catalog` is Delta's; Iceberg's JDBC catalog is
named `dataferry` (the name dataferry's embedded SQL catalog gives its rows) on one SQLite file
of the run, `Spark.iceberg_catalog` (pyiceberg's SQL catalog properties for the same file);
Hudi tables are read by path.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from . import CACHE, REPO, need_tool, stop_pid

JARS = CACHE / "jars" / "spark"
S3A_JARS = CACHE / "jars" / "spark-s3a"  # hadoop-aws for Spark's S3A committers, if fetched
PYTHON = CACHE / "spark" / "python"
WORKER = Path(__file__).with_name("spark_worker.py")
START_TIMEOUT_S = 180
CALL_TIMEOUT_S = 300
ICEBERG_CATALOG = "dataferry"  # = the catalog name of dataferry's embedded SQL catalog
EXTENSIONS = (
    "io.delta.sql.DeltaSparkSessionExtension",
    "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    "org.apache.spark.sql.hudi.HoodieSparkSessionExtension",
)


class SparkError(AssertionError):
    """Spark refused or failed a request (its Python traceback, the Java one inside)."""


@dataclass
class Spark:
    """The running Spark process and how to ask it things."""

    proc: subprocess.Popen
    workdir: Path
    version: str
    catalog_db: Path
    warehouse: Path
    log: Path
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def iceberg_catalog(self) -> dict[str, str]:
        """pyiceberg's `load_catalog` properties for the SQLite file Spark's JDBC catalog
        uses (dataferry's `catalog=` option)."""
        return {
            "name": ICEBERG_CATALOG,
            "type": "sql",
            "uri": f"sqlite:///{self.catalog_db}",
            "warehouse": self.warehouse.as_uri(),
        }

    def run(self, code: str, **variables: Any) -> Any:
        """Run `code` in the Spark process with `spark` and `variables` in scope; its
        `result`: a DataFrame comes back as a pyarrow Table, anything else as JSON gives it."""
        out = self.workdir / f"result-{uuid.uuid4().hex}.arrow"
        request = {"code": code, "vars": variables, "out": str(out)}
        with self._lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            reply = self._reply(CALL_TIMEOUT_S)
        if not reply["ok"]:
            raise SparkError(reply["error"])
        if "arrow" not in reply:
            return reply["value"]
        with pa.memory_map(str(out)) as source:
            table = pa.ipc.open_file(source).read_all()
        out.unlink()
        return table

    def read(self, fmt: str, path: str | Path, **options: str) -> pa.Table:
        """A table read by path (`fmt`: delta, hudi, parquet), options as Spark takes them."""
        code = "result = spark.read.format(fmt).options(**options).load(path)"
        return self.run(code, fmt=fmt, path=str(path), options=options)

    def sql(self, query: str) -> pa.Table | Any:
        return self.run("result = spark.sql(query)", query=query)

    def _reply(self, timeout_s: float) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            tail = self.log.read_text(errors="replace")[-4000:]
            raise SparkError(f"the Spark process gave no answer (exit {self.proc.poll()}):\n{tail}")
        return json.loads(line)

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass
        stop_pid(self.proc.pid)


def spark_conf(workdir: Path) -> dict[str, str]:
    jars = sorted(JARS.glob("*.jar"))
    # on the JVM's own class path rather than `spark.jars`: Spark would copy each of those
    # (the AWS SDK bundle: 280 MB) to its executor's work directory at the first task
    s3a_jars = ":".join(str(j) for j in sorted(S3A_JARS.glob("*.jar")))
    catalog = f"spark.sql.catalog.{ICEBERG_CATALOG}"
    return {
        "master": "local[2]",
        "spark.jars": ",".join(str(j) for j in jars),
        **({"spark.driver.extraClassPath": s3a_jars} if s3a_jars else {}),
        "spark.driver.memory": "1g",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.adaptive.enabled": "false",  # tiny queries; the scan's metrics on the plan
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": str(workdir / "spark-warehouse"),
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        "spark.sql.extensions": ",".join(EXTENSIONS),
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        catalog: "org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.type": "jdbc",
        f"{catalog}.uri": f"jdbc:sqlite:{workdir / 'catalog.db'}",
        f"{catalog}.jdbc.schema-version": "V1",
        f"{catalog}.cache-enabled": "false",  # dataferry commits between Spark's reads
        # the pool's connections keep SQLite's read lock, which makes pyiceberg's commits fail
        # with "database is locked"; in WAL mode readers do not block a writer
        f"{catalog}.jdbc.journal_mode": "WAL",
        f"{catalog}.warehouse": (workdir / "warehouse").as_uri(),
        # tiny tables on a loaded machine: the JVM's quick compiler, no generated code to
        # compile per query, Delta's log replay in two partitions (not fifty)
        "spark.driver.extraJavaOptions": " ".join(
            ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", f"-Dderby.system.home={workdir}")
        ),
        "spark.sql.codegen.wholeStage": "false",
        "spark.databricks.delta.snapshotPartitions": "2",
    }


def start_spark(workdir: Path) -> Spark:
    """Start the Spark process (skipped where Java, the jars or pyspark 3.5 are missing)."""
    need_tool("java", "Java 17", "apt-get install openjdk-17-jre-headless")
    if not any(JARS.glob("delta-spark*.jar")) or not (PYTHON / "pyspark").is_dir():
        pytest.skip("Spark with Delta, Iceberg and Hudi is not installed here (make servers)")
    (workdir / "warehouse").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(PYTHON), str(REPO / "src")])
    env["PYSPARK_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOCAL_DIRS"] = str(workdir / "local")
    log = workdir / "spark.log"
    with open(log, "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), json.dumps(spark_conf(workdir))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            cwd=workdir,
            text=True,
            start_new_session=True,  # its own group: the JVM is stopped with it
        )
    spark = Spark(proc, workdir, "", workdir / "catalog.db", workdir / "warehouse", log)
    try:
        spark.version = spark._reply(START_TIMEOUT_S)["value"]
    except BaseException:
        spark.stop()
        raise
    return spark


@pytest.fixture(scope="session")
def spark(tmp_path_factory) -> Iterator[Spark]:
    """The run's Spark (one per xdist worker: mark its modules `xdist_group("spark")`)."""
    workdir = tmp_path_factory.mktemp("spark")
    found = start_spark(workdir)
    try:
        yield found
    finally:
        found.stop()
        shutil.rmtree(workdir / "local", ignore_errors=True)
