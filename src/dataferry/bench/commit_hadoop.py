"""`bench commit --hadoop`: Hadoop's own committers on the same job shape.

Where Java 17 (`java`, `javac`) and the `pyspark` package (whose jars hold Hadoop) are present,
a small driver is compiled once against pyspark's jars and run in one JVM per run: it sets up
the job, writes each task's files (the bench's layout, written with plain Java I/O, not timed),
times each task commit, one task at a time, and then the job commit, on Hadoop's raw local file
system (no checksum files). It prints one JSON line. It drives Hadoop's FileOutputCommitter v1
(the peer of dataferry's `v1`) and, when the bench runs dataferry's `manifest`, Hadoop's own
ManifestCommitter with as many I/O threads (the fair peer of a manifest task commit: it lists
the attempt and saves a manifest, as dataferry's does; v1's task commit is one rename).
Elsewhere the peer is skipped, with the reason.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .java_driver import JavaDriver, PeerRuns, java_missing

MAIN_CLASS = "DataferryHadoopCommitBench"
JVM_TIMEOUT_S = 900

JAVA_SOURCE = r"""
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptContext;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;
import org.apache.hadoop.mapreduce.lib.output.FileOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.PathOutputCommitter;
import org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter;
import org.apache.hadoop.mapreduce.task.JobContextImpl;
import org.apache.hadoop.mapreduce.task.TaskAttemptContextImpl;

public final class DataferryHadoopCommitBench {
  public static void main(String[] a) throws Exception {
    String dest = a[0];
    int files = Integer.parseInt(a[1]), tasks = Integer.parseInt(a[2]);
    int parts = Integer.parseInt(a[3]), size = Integer.parseInt(a[4]);
    boolean manifest = a[5].equals("manifest");
    Configuration conf = new Configuration();
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
    conf.setBoolean("fs.file.impl.disable.cache", true);
    conf.setInt("mapreduce.fileoutputcommitter.algorithm.version", 1);
    conf.setInt("mapreduce.manifest.committer.io.threads", Integer.parseInt(a[6]));
    conf.setInt("mapreduce.job.application.attempt.id", 0);
    Path out = new Path("file://" + dest);
    JobID jobId = new JobID("202401010000", 1);
    JobContextImpl job = new JobContextImpl(conf, jobId);
    PathOutputCommitter driver = manifest
        ? new ManifestCommitter(out, new TaskAttemptContextImpl(
            conf, new TaskAttemptID(jobId.getJtIdentifier(), 1, TaskType.MAP, 0, 0)))
        : new FileOutputCommitter(out, job);
    driver.setupJob(job);
    byte[] payload = new byte[size];
    StringBuilder taskSeconds = new StringBuilder();
    for (int t = 0; t < tasks; t++) {
      TaskAttemptContext ctx = new TaskAttemptContextImpl(
          conf, new TaskAttemptID(jobId.getJtIdentifier(), 1, TaskType.MAP, t, 0));
      PathOutputCommitter c = manifest
          ? new ManifestCommitter(out, ctx) : new FileOutputCommitter(out, ctx);
      c.setupTask(ctx);
      int perTask = files / tasks + (t < files % tasks ? 1 : 0);
      int start = t * (files / tasks) + Math.min(t, files % tasks);
      String work = c.getWorkPath().toUri().getPath();
      for (int j = 0; j < perTask; j++) {
        java.nio.file.Path p = Paths.get(work, String.format("part=%04d", (start + j) % parts),
            String.format("part-%05d-%05d.bin", t, j));
        Files.createDirectories(p.getParent());
        Files.write(p, payload);
      }
      long t0 = System.nanoTime();
      if (c.needsTaskCommit(ctx)) {
        c.commitTask(ctx);
      }
      taskSeconds.append(t == 0 ? "" : ", ").append((System.nanoTime() - t0) / 1e9);
    }
    long t0 = System.nanoTime();
    driver.commitJob(job);
    double jobSeconds = (System.nanoTime() - t0) / 1e9;
    System.out.println("{\"task_commit_s\": [" + taskSeconds + "], \"job_commit_s\": "
        + jobSeconds + ", \"hadoop\": \"" + org.apache.hadoop.util.VersionInfo.getVersion()
        + "\"}");
  }
}
"""


COMMITTERS = ("v1", "manifest")  # Hadoop's peers of dataferry's committers of those names


@dataclass
class HadoopRun:
    """One run of one of Hadoop's committers on the bench's job: each task commit's seconds,
    the job's."""

    task_commit_s: list[float]
    job_commit_s: float
    version: str

    def to_json(self) -> dict[str, Any]:
        return {
            "task_commit_s": round(sum(self.task_commit_s), 4),
            "task_commit_median_s": round(statistics.median(self.task_commit_s), 5),
            "job_commit_s": round(self.job_commit_s, 4),
            "hadoop": self.version,
        }


def summary(runs: list[HadoopRun]) -> dict[str, Any]:
    """The medians of several runs of one committer (the task commits' sum per run, and the
    median task commit of each run), and each run."""
    return {
        "task_commit_s": statistics.median(sum(r.task_commit_s) for r in runs),
        "task_commit_median_s": statistics.median(statistics.median(r.task_commit_s) for r in runs),
        "job_commit_s": statistics.median(r.job_commit_s for r in runs),
        "runs": [r.to_json() for r in runs],
        "hadoop": runs[0].version,
    }


def pyspark_jars() -> Path | None:
    """pyspark's jar directory, if pyspark is installed and bundles Hadoop's client."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return jars if any(jars.glob("hadoop-client-api-*.jar")) else None


def missing() -> str | None:
    """Why the Hadoop peer cannot run here, or None."""
    if (no_java := java_missing()) is not None:
        return no_java
    if pyspark_jars() is None:
        return "needs pyspark (its jars hold Hadoop): pip install 'dataferry[interop]'"
    return None


class HadoopPeer:
    """The compiled driver (in a temporary directory, removed by `close`)."""

    def __init__(self) -> None:
        jars = pyspark_jars()
        assert jars is not None
        compile_cp = ":".join(str(p) for p in sorted(jars.glob("hadoop-client-*.jar")))
        self.driver = JavaDriver(MAIN_CLASS, JAVA_SOURCE, compile_cp, f"{jars}/*", JVM_TIMEOUT_S)

    def run(
        self,
        files: int,
        tasks: int,
        partitions: int,
        file_size: int,
        committer: str = "v1",
        io_threads: int = 32,
    ) -> HadoopRun:
        """The job through Hadoop's `committer` (one of COMMITTERS) in a fresh directory,
        removed afterwards."""
        if committer not in COMMITTERS:
            raise ValueError(f"Hadoop's peer of {committer!r} is not driven here")
        dest = tempfile.mkdtemp(prefix="dataferry-bench-hadoop-out-")
        try:
            shape = (files, tasks, partitions, file_size)
            args = [f"{dest}/out", *map(str, shape), committer, str(io_threads)]
            data = self.driver.run(args, "Hadoop's driver")
            return HadoopRun(data["task_commit_s"], data["job_commit_s"], data["hadoop"])
        finally:
            shutil.rmtree(dest, ignore_errors=True)

    def close(self) -> None:
        self.driver.close()


class HadoopPeerRuns(PeerRuns):
    """Hadoop's peers over a bench's repeats: compiled when asked for and possible, one job
    per repeat and peer (v1 always; the manifest committer when the bench runs dataferry's),
    and the medians: v1's at the top, each other peer's under its name (or why skipped)."""

    def __init__(self, wanted: bool, store: str, committers: Sequence[str]) -> None:
        super().__init__()
        self.runs: dict[str, list[HadoopRun]] = {
            c: [] for c in COMMITTERS if c == "v1" or c in committers
        }
        if wanted:
            local = store in ("local", "")
            not_here = None if local else "Hadoop's peer runs on local disk only (--store local)"
            self.start(not_here, missing, HadoopPeer)

    def run(self, spec: Any, say: Callable[[str], None]) -> None:
        """One job of the bench's shape through each peer (nothing when none is running)."""
        if self.peer is None:
            return
        for name, runs in self.runs.items():
            say(f"hadoop {name}: run {len(runs) + 1} of {spec.repeats}")
            runs.append(
                self.peer.run(
                    spec.files, spec.tasks, spec.partitions, spec.file_size, name, spec.io_threads
                )
            )

    def medians(self) -> dict[str, Any] | None:
        if not self.runs["v1"]:
            return None
        found = summary(self.runs["v1"])
        found.update({c: summary(r) for c, r in self.runs.items() if c != "v1" and r})
        return found
