"""`bench commit --s3-local --hadoop-s3a`: Hadoop's own S3A magic committer on the same server
and the same job shape as dataferry's committers.

Where Java 17 and the jars of deps/maven.txt set `s3a` (hadoop-aws with its AWS SDK bundle:
`make jars` puts them in .cache/jars/s3a; elsewhere name the directory in DATAFERRY_S3A_JARS)
are present, a small driver is compiled and run in one JVM against the bench's S3 server (its
endpoint and credentials from the AWS_* variables `--s3-local` exports): it sets up the job,
writes each task's files through the magic committer (not timed), times each task commit, one
at a time, then the job commit, and counts the S3 requests of the job commit from S3A's own
IOStatistics. It prints one JSON line. Elsewhere the peer is skipped, with the reason.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .java_driver import JavaDriver, PeerRuns, java_missing

MAIN_CLASS = "DataferryHadoopS3ABench"
JVM_TIMEOUT_S = 1800
JARS_ENV = "DATAFERRY_S3A_JARS"

JAVA_SOURCE = r"""
import java.io.OutputStream;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.commit.magic.MagicS3GuardCommitter;
import org.apache.hadoop.fs.statistics.IOStatisticsSnapshot;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.task.JobContextImpl;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;

public final class DataferryHadoopS3ABench {
  static Map<String, Long> counters(S3AFileSystem fs) {
    return new TreeMap<>(new IOStatisticsSnapshot(fs.getIOStatistics()).counters());
  }

  public static void main(String[] a) throws Exception {
    String dest = a[0];
    int files = Integer.parseInt(a[1]), tasks = Integer.parseInt(a[2]);
    int parts = Integer.parseInt(a[3]), size = Integer.parseInt(a[4]);
    Configuration conf = new Configuration();
    conf.set("fs.s3a.endpoint", System.getenv("AWS_ENDPOINT_URL"));
    conf.set("fs.s3a.endpoint.region", "us-east-1");
    conf.setBoolean("fs.s3a.path.style.access", true);
    conf.setBoolean("fs.s3a.connection.ssl.enabled", false);
    conf.set("fs.s3a.access.key", System.getenv("AWS_ACCESS_KEY_ID"));
    conf.set("fs.s3a.secret.key", System.getenv("AWS_SECRET_ACCESS_KEY"));
    conf.set("fs.s3a.aws.credentials.provider",
        "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider");
    conf.setBoolean("fs.s3a.committer.magic.enabled", true);
    conf.setBoolean("fs.s3a.change.detection.version.required", false);
    conf.setInt("fs.s3a.bucket.probe", 0);
    conf.setInt("fs.s3a.committer.threads", Integer.parseInt(a[5]));
    conf.set("spark.sql.sources.writeJobUUID", java.util.UUID.randomUUID().toString());
    Path out = new Path(dest);
    S3AFileSystem fs = (S3AFileSystem) out.getFileSystem(conf);
    JobID jobId = new JobID("202401010000", 1);
    JobContextImpl job = new JobContextImpl(conf, jobId);
    TaskAttemptContext driverCtx = new TaskAttemptContextImpl(
        conf, new TaskAttemptID(jobId.getJtIdentifier(), 1, TaskType.MAP, 0, 0));
    MagicS3GuardCommitter driver = new MagicS3GuardCommitter(out, driverCtx);
    driver.setupJob(job);
    byte[] payload = new byte[size];
    StringBuilder taskSeconds = new StringBuilder();
    for (int t = 0; t < tasks; t++) {
      TaskAttemptContext ctx = new TaskAttemptContextImpl(
          conf, new TaskAttemptID(jobId.getJtIdentifier(), 1, TaskType.MAP, t, 0));
      MagicS3GuardCommitter c = new MagicS3GuardCommitter(out, ctx);
      c.setupTask(ctx);
      int perTask = files / tasks + (t < files % tasks ? 1 : 0);
      int start = t * (files / tasks) + Math.min(t, files % tasks);
      Path work = c.getWorkPath();
      for (int j = 0; j < perTask; j++) {
        Path p = new Path(work, String.format("part=%04d/part-%05d-%05d.bin",
            (start + j) % parts, t, j));
        try (OutputStream o = fs.create(p, false)) {
          o.write(payload);
        }
      }
      long t0 = System.nanoTime();
      if (c.needsTaskCommit(ctx)) {
        c.commitTask(ctx);
      }
      taskSeconds.append(t == 0 ? "" : ", ").append((System.nanoTime() - t0) / 1e9);
    }
    Map<String, Long> before = counters(fs);
    long t0 = System.nanoTime();
    driver.commitJob(job);
    double jobSeconds = (System.nanoTime() - t0) / 1e9;
    StringBuilder requests = new StringBuilder();
    for (Map.Entry<String, Long> e : counters(fs).entrySet()) {
      long d = e.getValue() - before.getOrDefault(e.getKey(), 0L);
      if (d > 0 && !e.getKey().contains(".")) {
        requests.append(requests.length() == 0 ? "" : ", ")
            .append("\"").append(e.getKey()).append("\": ").append(d);
      }
    }
    fs.delete(out, true);
    System.out.println("{\"task_commit_s\": [" + taskSeconds + "], \"job_commit_s\": "
        + jobSeconds + ", \"job_commit_counters\": {" + requests + "}, \"hadoop\": \""
        + org.apache.hadoop.util.VersionInfo.getVersion() + "\"}");
  }
}
"""

# S3A's count of every request its AWS client executed (its audit layer sees each one: lists,
# HEADs, GETs, PUTs, deletes, and the completions, which no other counter of S3A counts alone)
REQUEST_COUNTER = "audit_request_execution"


@dataclass
class HadoopS3ARun:
    """One run of Hadoop's magic committer: each task commit's seconds, the job commit's, and
    the job commit's S3A counters."""

    task_commit_s: list[float]
    job_commit_s: float
    counters: dict[str, int]
    version: str

    @property
    def requests(self) -> int:
        return self.counters.get(REQUEST_COUNTER, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "task_commit_s": round(sum(self.task_commit_s), 4),
            "job_commit_s": round(self.job_commit_s, 4),
            "job_commit_requests": self.requests,
            "job_commit_counters": self.counters,
            "hadoop": self.version,
        }


def jars_dir() -> Path:
    """DATAFERRY_S3A_JARS, else the repository's `.cache/jars/s3a` (from the working
    directory, where `make jars` runs)."""
    return Path(os.environ.get(JARS_ENV) or Path.cwd() / ".cache" / "jars" / "s3a")


def missing() -> str | None:
    """Why the peer cannot run here, or None."""
    if (no_java := java_missing()) is not None:
        return no_java
    if not any(jars_dir().glob("hadoop-aws-*.jar")):
        return f"needs hadoop-aws in {jars_dir()} (`make jars`, or set {JARS_ENV})"
    if not os.environ.get("AWS_ENDPOINT_URL"):
        return "needs the S3 server's AWS_ENDPOINT_URL (--s3-local)"
    return None


class HadoopS3APeer:
    """The compiled driver (in a temporary directory, removed by `close`)."""

    def __init__(self) -> None:
        jars = f"{jars_dir()}/*"
        self.driver = JavaDriver(MAIN_CLASS, JAVA_SOURCE, jars, jars, JVM_TIMEOUT_S)

    def run(
        self, dest: str, files: int, tasks: int, partitions: int, file_size: int, threads: int
    ) -> HadoopS3ARun:
        """The job at `dest` (an s3:// URL on the bench's server), deleted afterwards."""
        shape = (files, tasks, partitions, file_size, threads)
        args = ["s3a://" + dest.split("://", 1)[1], *map(str, shape)]
        data = self.driver.run(args, "Hadoop's S3A driver")
        return HadoopS3ARun(
            data["task_commit_s"], data["job_commit_s"], data["job_commit_counters"], data["hadoop"]
        )

    def close(self) -> None:
        self.driver.close()


class S3APeerRuns(PeerRuns):
    """The peer over a bench's repeats: compiled when asked for and possible, one job per
    repeat, and the medians (or why it was skipped)."""

    def __init__(self, wanted: bool, store: str) -> None:
        super().__init__()
        self.runs: list[HadoopS3ARun] = []
        if wanted:
            s3 = store.startswith(("s3://", "s3a://"))
            not_here = None if s3 else "Hadoop's S3A peer runs on an S3 server only (--s3-local)"
            self.start(not_here, missing, HadoopS3APeer)

    def run(self, dest: str, spec: Any, say: Callable[[str], None]) -> None:
        """One job of the bench's shape at `dest` (nothing when the peer is not running)."""
        if self.peer is None:
            return
        say(f"hadoop magic: run {len(self.runs) + 1} of {spec.repeats}")
        self.runs.append(
            self.peer.run(
                dest, spec.files, spec.tasks, spec.partitions, spec.file_size, spec.io_threads
            )
        )

    def medians(self) -> dict[str, Any] | None:
        if not self.runs:
            return None
        return {
            "task_commit_s": statistics.median(sum(r.task_commit_s) for r in self.runs),
            "job_commit_s": statistics.median(r.job_commit_s for r in self.runs),
            "job_commit_requests": statistics.median(r.requests for r in self.runs),
            "runs": [r.to_json() for r in self.runs],
            "hadoop": self.runs[0].version,
        }
