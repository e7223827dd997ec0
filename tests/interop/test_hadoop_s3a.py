"""Hadoop's own S3A committers (hadoop-aws 3.5.0) and dataferry's, on a real S3 server.

`HadoopS3ACommit.java` is compiled once per session against the jars of deps/maven.txt set
`s3a` (.cache/jars/s3a, `make jars`) and drives Hadoop's magic, directory and partitioned
committers on SeaweedFS through S3A (path-style, plain HTTP, the server's credentials, the
magic committer enabled). One JVM launch for the whole module (the two directions and
the broken pendingset), Python doing its part before and after it:

1. Hadoop sets up the jobs and writes and commits the tasks of each committer (the magic
   committer's pendingsets in its magic directory; the staging committers' in Hadoop's local
   staging directory, copied into dataferry's place for them); dataferry commits each job.
   The same launch leaves one magic job's tasks committed and its job not, for `dataferry
   uploads list` and `dataferry cleanup`.
2. dataferry writes and commits the tasks; Hadoop commits the job: the magic committer's own
   `commitJob` finds dataferry's pendingsets in the magic directory; the staging committers'
   pendingsets are loaded and completed by Hadoop's `PendingSet`/`CommitOperations`, as
   Hadoop's staging job commit does each. Hadoop also reads dataferry's `_SUCCESS`.

Every output is compared object by object with what was written, and both sides' `_SUCCESS`
records are read by the other side's parser.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dataferry import make_committer
from dataferry.cli import app
from dataferry.commit.protocol import TaskCommitMessage
from dataferry.commit.records.success import SuccessData
from dataferry.commit.s3a.staging import layout
from dataferry.store import open_store
from tests.servers import CACHE

from .test_hadoop_manifest import _java_major

pytestmark = pytest.mark.xdist_group("seaweedfs")

JARS = CACHE / "jars" / "s3a"
JAVA_SOURCE = Path(__file__).with_name("HadoopS3ACommit.java")
MAIN_CLASS = "HadoopS3ACommit"
JVM_TIMEOUT_S = 300
KINDS = ("magic", "directory", "partitioned")
TASKS = {0: ["part=a b/x.bin", "top.bin"], 1: ["part=a b/y.bin", "part=c/z.bin"]}
EXPECTED = {p: f"{i}:{p}".encode() for i, files in TASKS.items() for p in files}


@dataclass(frozen=True)
class Hadoop:
    """A compiled driver, its classpath and the server it talks to."""

    classes: Path
    env: dict[str, str]

    def run(self, *modes: list[str], check: bool = True) -> list[list[str]]:
        """Run the modes in one JVM; its output lines split at tabs (AssertionError with
        Hadoop's error when it fails and `check`)."""
        args: list[str] = []
        for mode in modes:
            args += [*mode, "--"]
        cmd = ["java", "-cp", f"{JARS}/*:{self.classes}", MAIN_CLASS, *args[:-1]]
        out = subprocess.run(
            cmd, capture_output=True, timeout=JVM_TIMEOUT_S, env={**os.environ, **self.env}
        )
        stdout = out.stdout.decode("utf-8")
        if out.returncode != 0:
            tail = out.stderr.decode("utf-8", "replace")[-4000:]
            raise AssertionError(f"Hadoop failed ({out.returncode}):\n{stdout}\n{tail}")
        return [line.split("\t") for line in stdout.split("\n") if line]


@pytest.fixture(scope="session")
def hadoop_s3a(seaweed, tmp_path_factory) -> Hadoop:
    major = _java_major()
    if major is None or major < 17:
        pytest.skip("Hadoop's S3A committers need java and javac 17 or later on PATH")
    if not list(JARS.glob("hadoop-aws-*.jar")):
        pytest.skip("hadoop-aws is not fetched: `make jars` (deps/maven.txt set s3a)")
    classes = tmp_path_factory.mktemp("hadoop-s3a-classes")
    out = subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", f"{JARS}/*", str(JAVA_SOURCE)],
        capture_output=True,
        text=True,
        timeout=JVM_TIMEOUT_S,
    )
    assert out.returncode == 0, f"javac failed:\n{out.stdout}\n{out.stderr}"
    env = {
        "S3A_ENDPOINT": seaweed.endpoint,
        "S3A_KEY": seaweed.key,
        "S3A_SECRET": seaweed.secret,
        "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={tmp_path_factory.mktemp('hadoop-s3a-tmp')}",
    }
    return Hadoop(classes, env)


# --- helpers -------------------------------------------------------------------------------


def s3a(url: str) -> str:
    return "s3a://" + url.split("://", 1)[1]


def store_of(seaweed, url: str):
    return open_store(url, storage_options=seaweed.storage_options)


def tree(store) -> dict[str, bytes]:
    """Every object of the destination but `_SUCCESS` and the jobs' own directories."""
    return {
        s.path: store.read_bytes(s.path)
        for s in store.walk("")
        if s.path != "_SUCCESS" and not s.path.startswith("__")
    }


def success_of(store) -> tuple[dict, SuccessData]:
    raw = store.read_bytes("_SUCCESS")
    return json.loads(raw), SuccessData.from_bytes(raw, store.full_url("_SUCCESS"))


def spec_file(base: Path) -> Path:
    spec = base / "tasks.tsv"
    spec.write_text(
        "".join(f"{i}\t{p}\n" for i, files in TASKS.items() for p in files), encoding="utf-8"
    )
    return spec


def dataferry_tasks(committer, job) -> list[TaskCommitMessage]:
    messages = []
    for index, files in TASKS.items():
        task = job.task(index)
        committer.setup_task(task)
        for relpath in files:
            committer.write_file(task, relpath, f"{index}:{relpath}".encode())
        messages.append(committer.commit_task(task))
    return messages


def committer_of(kind: str, store, tmp: Path):
    options = {"staging_dir": str(tmp / "staging")} if kind != "magic" else {}
    return make_committer(kind, store, success_data=True, **options)


# --- direction 1: Hadoop's tasks, dataferry's job commit -------------------------------------


@dataclass(frozen=True)
class FromHadoop:
    dests: dict[str, str]  # kind -> s3:// URL committed by dataferry
    pending: str  # a Hadoop magic job whose tasks committed and whose job did not


@dataclass(frozen=True)
class FromDataferry:
    dests: dict[str, str]
    reference: str  # dataferry's own magic commit, start to end
    lines: list[list[str]]


@dataclass(frozen=True)
class Broken:
    dest: str
    relpath: str  # the object the refused pendingset names
    lines: list[list[str]]


@dataclass(frozen=True)
class Rounds:
    """What the module's one JVM launch and dataferry's parts around it left."""

    from_hadoop: FromHadoop
    from_dataferry: FromDataferry
    broken: Broken


@pytest.fixture(scope="module")
def rounds(hadoop_s3a, seaweed, tmp_path_factory) -> Rounds:
    base = tmp_path_factory.mktemp("s3a-rounds")
    jobs, modes_1 = hadoop_tasks_modes(seaweed, base)
    pending = seaweed.url()
    spec = str(spec_file(base))
    modes_1.append(
        ["tasks", "magic", s3a(pending), "job_202612070000_0007", str(uuid.uuid4()), spec]
    )
    dests_2, reference, modes_2 = dataferry_tasks_modes(seaweed, base)
    broken_dest, relpath, broken_file = broken_pendingset(seaweed, base)
    lines = hadoop_s3a.run(
        *modes_1, *modes_2, ["try", "commit-pendingsets", s3a(broken_dest), str(broken_file)]
    )
    commit_hadoops_tasks(jobs, lines)
    return Rounds(
        FromHadoop({kind: committer.store.url for kind, (committer, _) in jobs.items()}, pending),
        FromDataferry(dests_2, reference, lines),
        Broken(
            broken_dest, relpath, [line for line in lines if line[0] in ("failed", "succeeded")]
        ),
    )


@pytest.fixture(scope="module")
def from_hadoop(rounds) -> FromHadoop:
    return rounds.from_hadoop


@pytest.fixture(scope="module")
def from_dataferry(rounds) -> FromDataferry:
    return rounds.from_dataferry


# --- direction 1: Hadoop's tasks, dataferry's job commit -------------------------------------


def hadoop_tasks_modes(seaweed, base: Path) -> tuple[dict, list[list[str]]]:
    """A dataferry job per kind whose tasks Hadoop is to write and commit; the JVM's modes."""
    spec = spec_file(base)
    jobs, modes = {}, []
    for kind in KINDS:
        committer = committer_of(kind, store_of(seaweed, seaweed.url()), base)
        job = committer.new_job()
        jobs[kind] = (committer, job)
        dest = s3a(committer.store.url)
        modes.append(["tasks", kind, dest, str(job.job_id), job.job_uuid, str(spec)])
    return jobs, modes


def commit_hadoops_tasks(jobs: dict, lines: list[list[str]]) -> None:
    """dataferry's job commit of each job whose tasks Hadoop committed."""
    tasks = [line for line in lines if line[0] == "task"]
    assert len(tasks) == len(TASKS) * (len(KINDS) + 1)
    for kind, (committer, job) in jobs.items():
        ours = [line for line in tasks if line[1].startswith(f"task_{str(job.job_id)[4:]}")]
        messages = [TaskCommitMessage(str(job.job_id), t, a, kind) for _, t, a in ours]
        assert len(messages) == len(TASKS)
        if kind != "magic":  # Hadoop's staging pendingsets are on local disk: into our place
            found = [
                line[1] for line in lines if line[0] == "pendingset" and job.job_uuid in line[1]
            ]
            for m in messages:
                (path,) = [f for f in found if Path(f).name == m.task_id]
                committer.store.write_bytes(
                    layout.pendingset_path(job, m.attempt_id), Path(path).read_bytes()
                )
        committer.commit_job(job, messages)


@pytest.mark.parametrize("kind", KINDS)
def test_dataferry_commits_hadoops_tasks_exactly(from_hadoop, seaweed, kind):
    """dataferry's job commit completes the uploads Hadoop's task commits left, each object
    byte for byte what the task wrote (a pendingset read wrongly would publish nothing, the
    wrong key, or fail the commit)."""
    store = store_of(seaweed, from_hadoop.dests[kind])
    assert tree(store) == EXPECTED
    # no object of either job is left (SeaweedFS may still list the emptied directory: the
    # S3 store's handling of a file-system-backed server's directories is not this test's)
    assert [s.path for s in store.walk("") if s.path.startswith("__")] == []
    assert store.list_uploads("") == []


@pytest.mark.parametrize("kind", KINDS)
def test_dataferrys_success_after_hadoops_tasks_names_every_file(from_hadoop, seaweed, kind):
    store = store_of(seaweed, from_hadoop.dests[kind])
    _, success = success_of(store)
    assert {store.relative_path(f) for f in success.filenames} == set(EXPECTED)


def test_uploads_list_and_cleanup_handle_a_hadoop_jobs_pending_uploads(from_hadoop, seaweed):
    """A Hadoop magic job that died after its task commits left uploads pending (billed, and
    invisible): `dataferry uploads list` shows them, `dataferry cleanup` aborts them all and
    removes the magic directory, and nothing becomes visible."""
    runner = CliRunner()
    env = seaweed.env
    listed = runner.invoke(app, ["uploads", "list", from_hadoop.pending, "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    keys = {u["path"] for u in json.loads(listed.output)}
    assert keys == set(EXPECTED)
    cleaned = runner.invoke(
        app, ["cleanup", from_hadoop.pending, "--older-than", "0s", "--json"], env=env
    )
    assert cleaned.exit_code == 0, cleaned.output
    store = store_of(seaweed, from_hadoop.pending)
    assert store.list_uploads("") == []
    assert [s.path for s in store.walk("")] == []


# --- direction 2: dataferry's tasks, Hadoop's job commit -------------------------------------


def dataferry_tasks_modes(seaweed, base: Path) -> tuple[dict[str, str], str, list[list[str]]]:
    """dataferry's own magic commit (the reference) and, per kind, dataferry's committed tasks
    for Hadoop to commit the job of: their URLs and the JVM's modes."""
    reference = seaweed.url()
    committer = committer_of("magic", store_of(seaweed, reference), base)
    job = committer.new_job()
    committer.setup_job(job)
    committer.commit_job(job, dataferry_tasks(committer, job))
    dests = {kind: seaweed.url() for kind in KINDS}
    modes: list[list[str]] = []
    for kind in KINDS:
        committer = committer_of(kind, store_of(seaweed, dests[kind]), base)
        job = committer.new_job()
        committer.setup_job(job)
        messages = dataferry_tasks(committer, job)
        if kind == "magic":
            modes.append(["commit", "magic", s3a(dests[kind]), str(job.job_id), job.job_uuid])
            continue
        files = []
        for m in messages:
            local = base / kind / f"{m.attempt_id}.pendingset"
            local.parent.mkdir(exist_ok=True)
            local.write_bytes(committer.store.read_bytes(layout.pendingset_path(job, m.attempt_id)))
            files.append(str(local))
        modes.append(["commit-pendingsets", s3a(dests[kind]), *files])
    modes.append(["read-success", s3a(reference) + "/_SUCCESS"])
    return dests, reference, modes


@pytest.mark.parametrize("kind", KINDS)
def test_hadoop_commits_dataferrys_tasks_exactly(from_dataferry, seaweed, kind):
    """Hadoop completes dataferry's pendingsets: every object byte for byte what the task
    wrote (a pendingset Hadoop cannot load, or a wrong etag list, fails its commit)."""
    store = store_of(seaweed, from_dataferry.dests[kind])
    assert tree(store) == EXPECTED == tree(store_of(seaweed, from_dataferry.reference))
    assert store.list_uploads("") == []


def test_hadoop_reads_dataferrys_success(from_dataferry, seaweed):
    store = store_of(seaweed, from_dataferry.reference)
    theirs = {line[1] for line in from_dataferry.lines if line[0] == "file"}
    ours, _ = success_of(store)
    assert theirs == set(ours["filenames"]) and len(theirs) == len(EXPECTED)
    (committer,) = [line[1] for line in from_dataferry.lines if line[0] == "committer"]
    assert committer == success_of(store)[1].committer


def test_dataferry_reads_hadoops_success(from_dataferry, seaweed):
    """Hadoop's magic job commit wrote its `_SUCCESS`; dataferry's parser reads every file of
    it (S3A lists each as `/<bucket key>`) and it has no field dataferry's own lacks."""
    url = from_dataferry.dests["magic"]
    store = store_of(seaweed, url)
    theirs, success = success_of(store)
    prefix = url.split("://", 1)[1].split("/", 1)[1]
    assert set(success.filenames) == {f"/{prefix}/{p}" for p in EXPECTED}
    ours, _ = success_of(store_of(seaweed, from_dataferry.reference))
    assert set(theirs) <= set(ours), set(theirs) - set(ours)


# --- a broken artifact is refused ------------------------------------------------------------


def broken_pendingset(seaweed, base: Path) -> tuple[str, str, Path]:
    """A directory committer's pendingset of dataferry with its first etag replaced: its
    destination, the object it names and the local copy Hadoop is to commit."""
    dest = seaweed.url()
    committer = committer_of("directory", store_of(seaweed, dest), base / "broken")
    job = committer.new_job()
    committer.setup_job(job)
    (m, *_) = dataferry_tasks(committer, job)
    data = json.loads(committer.store.read_bytes(layout.pendingset_path(job, m.attempt_id)))
    data["commits"][0]["etags"][0]["etag"] = '"' + "0" * 32 + '"'
    local = base / "broken.pendingset"
    local.write_text(json.dumps(data))
    relpath = data["commits"][0]["destinationKey"].split("/", 1)[1]  # below the URL's prefix
    return dest, relpath, local


def test_hadoop_refuses_a_pendingset_with_a_wrong_etag_list(rounds, seaweed):
    """A pendingset whose etags are not the upload's parts must fail Hadoop's commit (else the
    interop tests above could pass on a committer that writes any etags at all) and leave the
    object unpublished."""
    ((outcome, mode, *_),) = rounds.broken.lines
    assert (outcome, mode) == ("failed", "commit-pendingsets"), rounds.broken.lines
    assert not store_of(seaweed, rounds.broken.dest).exists(rounds.broken.relpath)
