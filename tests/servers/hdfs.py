"""HDFS for the tests: a MiniDFSCluster (Hadoop's own test cluster: one NameNode, one
DataNode, in one JVM) on 127.0.0.1, reached from Python through hdfs-native (`hdfs://`).

The jars are deps/maven.txt's set `hdfs` (`make jars` puts them in .cache/jars/hdfs/); the few
lines of Java that start the cluster (MiniHdfs.java, beside this module) are compiled with
javac once, into .cache/hdfs-classes/ (by the source's digest). One cluster serves every xdist worker
(`shared_server`); each test gets a fresh directory in it (`hdfs_url`).

Startup is what the suite pays for HDFS, so it is trimmed: WebHDFS off (its Jersey scan reads
the 56 MB minicluster jar), the web apps' static files extracted from the jar onto the class
path (Jetty would otherwise copy them out of the jar by reading it whole, once per server),
and the JVM's client compiler only. A close that outruns the DataNode's report of the
file's last block is refused by the NameNode and retried by hdfs-native half a second later,
so many small writes cost that much here (as on a real cluster).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from . import CACHE, ServerProcess, free_port, need_tool, shared_server

JAVA_SOURCE = Path(__file__).with_name("MiniHdfs.java")
JARS = CACHE / "jars" / "hdfs"
JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx1g")


def _jars() -> Path:
    if not (JARS / ".complete").exists():
        pytest.skip("Hadoop's minicluster jars are not fetched here (make jars fetches them)")
    return JARS


def _webapps(jars: Path, into: Path) -> None:
    """The web apps' files of the minicluster jar, as a class path directory."""
    jar = next(jars.glob("hadoop-client-minicluster-*.jar"))
    with zipfile.ZipFile(jar) as z:
        z.extractall(into, [n for n in z.namelist() if n.startswith("webapps/")])


def _compiled(jars: Path) -> Path:
    """MiniHdfs.java compiled, with the web apps beside it: a class path directory kept in
    the cache under the source's and the jars' digest (made once, then reused)."""
    digest = hashlib.sha256(JAVA_SOURCE.read_bytes())
    digest.update((jars / ".complete").read_bytes())
    out = CACHE / "hdfs-classes" / digest.hexdigest()[:16]
    if out.exists():
        return out
    javac = need_tool("javac", "javac (a JDK 17)", "apt-get install openjdk-17-jdk-headless")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="building-", dir=out.parent))
    subprocess.run(
        [javac, "-nowarn", "-cp", f"{jars}/*", "-d", str(tmp), str(JAVA_SOURCE)],
        check=True,
        capture_output=True,
    )
    _webapps(jars, tmp)
    try:
        tmp.rename(out)
    except OSError:  # another run made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def start_hdfs(workdir: Path) -> tuple[int, dict]:
    """Start the cluster (MiniHdfs.java compiled once), wait for its port; (pid, info)."""
    java = need_tool("java", "Java (17)", "apt-get install openjdk-17-jdk-headless")
    jars = _jars()
    began = time.monotonic()
    classpath = os.pathsep.join([str(_compiled(jars)), f"{jars}/*"])
    data = workdir / "data"
    port = free_port()
    log = workdir / "hdfs.log"
    # under xdist the controller outlives every worker: the cluster ends with the run
    watch = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    server = ServerProcess(
        "MiniDFSCluster",
        [java, *JVM_FLAGS, "-cp", classpath, "MiniHdfs", str(data), str(port), str(watch)],
        log,
        ready=lambda: f"PORT {port}" in log.read_text(errors="replace"),
        cwd=workdir,
    ).start()
    info = {"port": port, "url": f"hdfs://127.0.0.1:{port}", "startup_s": time.monotonic() - began}
    return server.pid, info


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory):
    """The MiniDFSCluster of this run: {"port", "url" (hdfs://127.0.0.1:PORT), "startup_s"}."""
    with shared_server("hdfs", tmp_path_factory, start_hdfs) as info:
        yield info


@pytest.fixture
def hdfs_url(hdfs_cluster) -> str:
    """A fresh directory's URL on the cluster (not created: as a destination a job is given)."""
    return f"{hdfs_cluster['url']}/t-{uuid.uuid4().hex[:12]}"
