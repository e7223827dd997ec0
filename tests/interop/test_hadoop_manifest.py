"""Hadoop's own ManifestCommitter and dataferry's, committing each other's work.

Where Java 17 (`java`, `javac`) and the `pyspark` package (whose jars hold Hadoop >= 3.3.5) are
present, `HadoopManifestCommit.java` is compiled once per session against pyspark's jars and
drives Hadoop's committer on the local file system, one JVM launch per direction:

1. dataferry writes and commits the tasks (its manifests); Hadoop commits the job. The same
   launch has Hadoop load one of dataferry's manifests and dataferry's own `_SUCCESS`, and
   print the URIs it writes for a set of awkward names (compared with `store.uris`).
2. Hadoop sets up the job, writes and commits the tasks (its manifests); dataferry commits the
   job from them.

The destination's name needs encoding (a space, a literal `%20`, a non-ASCII letter) and so do
the partition directories and file names. Each output is compared file by file with
dataferry's own commit of the same data, and the `_SUCCESS` records with each other.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from dataferry import make_committer
from dataferry.commit.manifest.layout import JobLayout
from dataferry.commit.protocol import TaskCommitMessage
from dataferry.commit.records.success import SuccessData
from dataferry.store import open_store
from dataferry.store.uris import to_hadoop_uri

DEST_NAME = "out put%20é"  # a space, a literal "%20" (must stay three characters), a non-ASCII
TASKS = {
    0: ["part=a b/x.bin", "part=a b/sub dir/é%.bin", "top é%20.bin"],
    1: ["part=a b/y.bin", "part=c%3Dd/z #1?.bin"],
    2: ["part=ü/w.bin"],
}
JAVA_SOURCE = Path(__file__).with_name("HadoopManifestCommit.java")
MAIN_CLASS = "HadoopManifestCommit"
JVM_TIMEOUT_S = 120
MIN_HADOOP = (3, 3, 5)  # the first Hadoop release with the manifest committer


# --- the Java side -------------------------------------------------------------------------


def _java_major() -> int | None:
    """The major version of `javac`, or None where there is none."""
    if not (shutil.which("java") and shutil.which("javac")):
        return None
    out = subprocess.run(["javac", "-version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"javac (\d+)", out.stdout + out.stderr)
    return int(m.group(1)) if m else None


def _pyspark_jars() -> tuple[Path, tuple[int, ...]] | None:
    """pyspark's jar directory and the version of the Hadoop it bundles, or None."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    api = sorted(jars.glob("hadoop-client-api-*.jar"))
    if not api:
        return None
    m = re.match(r"hadoop-client-api-(\d+)\.(\d+)\.(\d+)", api[-1].name)
    return jars, (tuple(int(g) for g in m.groups()) if m else (0,))


@dataclass(frozen=True)
class Hadoop:
    """A compiled driver and the classpath to run it with."""

    classes: Path
    jars: Path

    def run(self, *modes: list[str]) -> list[list[str]]:
        """Run the modes in one JVM; returns its output lines, split at tabs."""
        args: list[str] = []
        for mode in modes:
            args += [*mode, "--"]
        cmd = ["java", "-cp", f"{self.jars}/*:{self.classes}", MAIN_CLASS, *args[:-1]]
        out = subprocess.run(cmd, capture_output=True, timeout=JVM_TIMEOUT_S)
        stdout = out.stdout.decode("utf-8")
        if out.returncode != 0:
            tail = out.stderr.decode("utf-8", "replace")[-4000:]
            raise AssertionError(f"Hadoop failed ({out.returncode}):\n{stdout}\n{tail}")
        return [line.split("\t") for line in stdout.split("\n") if line]


@pytest.fixture(scope="session")
def hadoop(tmp_path_factory) -> Hadoop:
    major = _java_major()
    if major is None:
        pytest.skip("real Hadoop needs java and javac (17 or later) on PATH")
    if major < 17:
        pytest.skip(f"real Hadoop needs Java 17 or later, found javac {major}")
    found = _pyspark_jars()
    if found is None:
        pytest.skip("real Hadoop needs pyspark (pip install 'dataferry[interop]')")
    jars, version = found
    if version < MIN_HADOOP:
        pytest.skip(
            f"pyspark bundles Hadoop {'.'.join(map(str, version))}, which has no manifest "
            "committer (3.3.5 or later: pyspark >= 4.0)"
        )
    classes = tmp_path_factory.mktemp("hadoop-classes")
    compile_cp = ":".join(str(p) for p in sorted(jars.glob("hadoop-client-*.jar")))
    out = subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", compile_cp, str(JAVA_SOURCE)],
        capture_output=True,
        text=True,
        timeout=JVM_TIMEOUT_S,
    )
    assert out.returncode == 0, f"javac failed:\n{out.stdout}\n{out.stderr}"
    return Hadoop(classes, jars)


# --- dataferry's side and the comparisons --------------------------------------------------


def content(task: int, relpath: str) -> bytes:
    """What both sides write for one file (the Java driver writes exactly this)."""
    return f"{task}:{relpath}".encode()


def write_tasks(committer, job) -> list[TaskCommitMessage]:
    """dataferry's tasks: every file of TASKS written and committed, one task each."""
    messages = []
    for index, files in TASKS.items():
        task = job.task(index)
        committer.setup_task(task)
        for relpath in files:
            committer.write_file(task, relpath, content(index, relpath))
        messages.append(committer.commit_task(task))
    return messages


def tree(root: Path) -> dict[str, bytes]:
    """Every file under a directory but `_SUCCESS`: relative path -> bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "_SUCCESS"
    }


def success_of(root: Path) -> tuple[dict, SuccessData]:
    raw = (root / "_SUCCESS").read_bytes()
    return json.loads(raw), SuccessData.from_bytes(raw, str(root / "_SUCCESS"))


def committed_paths(root: Path) -> set[str]:
    """The `_SUCCESS` file list as decoded destination-relative paths."""
    store = open_store(str(root))
    return {store.relative_path(url) for url in success_of(root)[1].filenames}


EXPECTED = {relpath: content(i, relpath) for i, files in TASKS.items() for relpath in files}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """dataferry's own commit of the data, start to end."""
    dest = tmp_path_factory.mktemp("reference") / DEST_NAME
    committer = make_committer("manifest", open_store(str(dest)), success_data=True)
    job = committer.new_job()
    committer.setup_job(job)
    committer.commit_job(job, write_tasks(committer, job))
    assert tree(dest) == EXPECTED
    return dest


def awkward_names(count: int = 300) -> list[str]:
    """Single path segments that exercise every quoting rule of java.net.URI (fixed seed)."""
    pool = [chr(c) for c in range(0x20, 0x7F) if chr(c) != "/"]
    pool += ["\t", "\x01", "\x7f", "\x85", "\xa0", "é", "ß", "中", "\u2028", "\u3000"]
    pool += ["\u200b", "\ufeff", "😀", "\U00010348"]
    rng = random.Random(20240611)
    names = ["out put", "%", "%20", "%2520", "a#b", "a?b=c", "é", "part=a b", "[x]{y}"]
    while len(names) < count:
        name = "".join(rng.choice(pool) for _ in range(rng.randint(1, 12)))
        if name not in (".", "..") and "\\" not in name:  # dataferry refuses backslashes
            names.append(name)
    return names


# --- direction 1: dataferry's tasks, Hadoop's job commit -------------------------------------


@dataclass(frozen=True)
class HadoopCommit:
    dest: Path
    lines: list[list[str]]
    names: list[str]
    encode_dir: Path

    def values(self, kind: str) -> list[str]:
        return [line[1] for line in self.lines if line[0] == kind]


@pytest.fixture(scope="module")
def hadoop_commit(hadoop, reference, tmp_path_factory) -> HadoopCommit:
    base = tmp_path_factory.mktemp("hadoop-commits")
    dest = base / DEST_NAME
    store = open_store(str(dest))
    committer = make_committer("manifest", store, success_data=True)
    job = committer.new_job()
    committer.setup_job(job)
    messages = write_tasks(committer, job)
    manifest = dest / JobLayout.of(job).manifest_path(messages[0].task_id)
    names = awkward_names()
    names_file = base / "names.txt"
    names_file.write_text("\n".join(names), encoding="utf-8")
    encode_dir = base / DEST_NAME / "enc"
    lines = hadoop.run(
        ["encode", str(encode_dir), str(names_file)],
        ["read-manifest", str(manifest)],
        ["read-success", str(reference / "_SUCCESS")],
        ["commit", str(dest), str(job.job_id), job.job_uuid],
    )
    return HadoopCommit(dest, lines, names, encode_dir)


def test_hadoop_commits_dataferrys_tasks_exactly(hadoop_commit, reference):
    assert tree(hadoop_commit.dest) == tree(reference) == EXPECTED
    assert not (hadoop_commit.dest / "_temporary").exists()


def test_hadoops_success_lists_what_dataferrys_lists(hadoop_commit, reference):
    assert committed_paths(hadoop_commit.dest) == committed_paths(reference) == set(EXPECTED)


def test_dataferrys_success_has_every_field_hadoop_writes(hadoop_commit, reference):
    theirs, _ = success_of(hadoop_commit.dest)
    ours, _ = success_of(reference)
    assert theirs["name"] == ours["name"]
    assert set(theirs) <= set(ours), set(theirs) - set(ours)
    # the same URIs, byte for byte, but for the two destinations' own roots
    root_theirs = to_hadoop_uri(open_store(str(hadoop_commit.dest)))
    root_ours = to_hadoop_uri(open_store(str(reference)))
    assert sorted(f.replace(root_theirs, "") for f in theirs["filenames"]) == sorted(
        f.replace(root_ours, "") for f in ours["filenames"]
    )


def test_hadoop_reads_dataferrys_success(hadoop_commit, reference):
    assert set(hadoop_commit.values("file")) == {f"{reference}/{p}" for p in EXPECTED}


def test_hadoop_reads_dataferrys_manifest(hadoop_commit):
    root = hadoop_commit.dest
    assert set(hadoop_commit.values("dest")) == {f"{root}/{p}" for p in TASKS[0]}
    assert set(hadoop_commit.values("dir")) >= {f"{root}/part=a b"}


def test_uris_are_encoded_as_hadoop_encodes_them(hadoop_commit):
    store = open_store(str(hadoop_commit.encode_dir))
    ours = [to_hadoop_uri(store, name) for name in hadoop_commit.names]
    theirs = hadoop_commit.values("uri")
    assert len(theirs) == len(ours)
    mismatches = [
        (n, o, t) for n, o, t in zip(hadoop_commit.names, ours, theirs, strict=True) if o != t
    ]
    assert not mismatches, mismatches[:5]


# --- direction 2: Hadoop's tasks, dataferry's job commit -------------------------------------


@pytest.fixture(scope="module")
def dataferry_commit(hadoop, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("dataferry-commits")
    dest = base / DEST_NAME
    committer = make_committer("manifest", open_store(str(dest)), success_data=True)
    job = committer.new_job()
    spec = base / "tasks.tsv"
    spec.write_text(
        "".join(f"{i}\t{p}\n" for i, files in TASKS.items() for p in files), encoding="utf-8"
    )
    lines = hadoop.run(["tasks", str(dest), str(job.job_id), job.job_uuid, str(spec)])
    messages = [
        TaskCommitMessage(str(job.job_id), task_id, attempt_id, "manifest")
        for kind, task_id, attempt_id in lines
        if kind == "task"
    ]
    assert len(messages) == len(TASKS)
    manifests = dest / JobLayout.of(job).manifests_dir
    assert len(list(manifests.glob("*-manifest.json"))) == len(TASKS)  # Hadoop's own
    committer.commit_job(job, messages)
    return dest


def test_dataferry_commits_hadoops_tasks_exactly(dataferry_commit, reference):
    assert tree(dataferry_commit) == tree(reference) == EXPECTED
    assert not (dataferry_commit / "_temporary").exists()


def test_dataferrys_success_after_hadoops_tasks(dataferry_commit, hadoop_commit):
    assert committed_paths(dataferry_commit) == committed_paths(hadoop_commit.dest)
    ours, _ = success_of(dataferry_commit)
    theirs, _ = success_of(hadoop_commit.dest)
    assert set(theirs) <= set(ours)
