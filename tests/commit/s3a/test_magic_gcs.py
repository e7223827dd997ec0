"""`magic-gcs` on fake-gcs-server: resumable sessions left open by the tasks, finalized by
the job commit; `auto` and `check-store` agree on it; `uploads list|abort` find its sessions.
(The commit contract, crashes and recovery included, runs it too: tests/commit/test_contract.py.)"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from dataferry import make_committer, write_dataset
from dataferry.cli import app
from dataferry.commit.factory import choose_committer
from dataferry.commit.s3a.magic.files import read_pendingset_file
from dataferry.store import open_store
from dataferry.store.gcs.sessions import CHUNK, SessionMark
from tests.commit.helpers import run_tasks, visible

pytestmark = pytest.mark.xdist_group("fakegcs")

BIG = b"x" * (CHUNK + 1000)  # a whole chunk sent by the task, 1000 bytes held in the record


def test_check_store_recommends_what_auto_picks(gcs_url):
    """check-store measures the emulator through gcsfs; a store declaring other capabilities
    than its client has would make `auto` pick a committer check-store does not recommend."""
    res = CliRunner().invoke(app, ["check-store", gcs_url, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    measured = {k: v["value"] for k, v in data["measured"].items()}
    assert measured["atomic_o1_file_rename"] is False  # gcsfs: a copy
    assert measured["conditional_create"] and measured["resumable_upload"]
    assert data["recommended"] == choose_committer(open_store(gcs_url)) == "magic-gcs"


def test_write_dataset_picks_magic_gcs_and_commits_whole(gcs_url):
    table = pa.table({"k": [1, 2, 1, 3], "v": ["a", "b", "c", "d"]})
    result = write_dataset(table, gcs_url, partition_by=["k"])
    assert result.committer == "magic-gcs"
    store = open_store(gcs_url)
    files = visible(store)
    assert {f.split("/")[0] for f in files} == {"k=1", "k=2", "k=3"}
    assert [s.path for s in store.walk("") if s.path.startswith("__magic")] == []


def test_tasks_leave_open_sessions_that_job_commit_finalizes(gcs_url):
    """Nothing a task wrote is visible before job commit, and the task's pendingset holds,
    in S3A's shape, the session URI and the bytes still to send: a commit that lost those
    bytes, or a task that finalized its own session, would publish a file the job never
    committed (or a truncated one)."""
    store = open_store(gcs_url)
    c = make_committer("magic-gcs", store)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(
        c, job, {0: ["a/big"], 1: ["b/small"]}, data=lambda i, n: BIG if i == 0 else b"s"
    )
    assert visible(store) == []
    # task commit left each attempt its claim and its own pendingset copy: the `.pending`
    # records (one a file, no marker: GCS cannot list sessions by key) went with it
    tasks = [s.path.split("/tasks/", 1)[1] for s in store.walk("") if "/tasks/" in s.path]
    assert sorted(p.rsplit("/", 1)[-1] for p in tasks) == [
        "_attempt",
        "_attempt",
        "_attempt.pendingset",
        "_attempt.pendingset",
    ]
    pset = read_pendingset_file(store, msgs[0].extra["pendingset"])
    (commit,) = pset.commits
    assert commit.upload_id.startswith("http") and "upload_id=" in commit.upload_id
    mark = SessionMark.decode(commit.etags[-1])
    assert (mark.sent, len(mark.held), commit.length) == (CHUNK, 1000, len(BIG))
    c.commit_job(job, msgs)
    assert visible(store) == ["a/big", "b/small"]
    assert store.read_bytes("a/big") == BIG and store.read_bytes("b/small") == b"s"


def test_uploads_list_and_abort_find_the_sessions_of_a_dead_job(gcs_url):
    """GCS cannot list sessions: `uploads list|abort` read them from the jobs' records, the
    committed tasks' pendingsets (their `.pending` records went at task commit) and an attempt
    still writing's `.pending`. Without that a dead job's open sessions (each holding the
    task's data) could not be found; a record left after its sessions were aborted would
    list them again."""
    store = open_store(gcs_url)
    c = make_committer("magic-gcs", store)
    job = c.new_job()
    c.setup_job(job)
    run_tasks(c, job, {0: ["one"], 1: ["two"]})
    running = job.task(2)
    c.setup_task(running)
    c.write_file(running, "three", b"3")  # not committed: named by its .pending only
    res = CliRunner().invoke(app, ["uploads", "list", gcs_url, "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert sorted(u["path"] for u in listed) == ["one", "three", "two"]
    assert all(u["upload_id"].startswith("http") for u in listed)
    res = CliRunner().invoke(app, ["uploads", "abort", gcs_url, "--older-than", "0s"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["uploads", "list", gcs_url, "--json"])
    assert json.loads(res.stdout) == []
    assert visible(store) == []


def test_a_record_naming_a_session_kept_is_kept():
    """`uploads abort --older-than` aborts some sessions of a pendingset and not others:
    deleting that pendingset would leave the kept sessions named by nothing (never found
    again, never finalized by their job)."""
    from dataferry.commit.job.cleanup import spent_records
    from dataferry.commit.s3a.magic.gcs import RecordedUpload

    old = RecordedUpload("a", "s1", 1.0, records=("t0.pendingset", "t0/_attempt.pendingset"))
    new = RecordedUpload("b", "s2", 9.0, records=("t0.pendingset", "t0/_attempt.pendingset"))
    alone = RecordedUpload("c", "s3", 1.0, records=("t1/__base/c.pending",))
    assert spent_records([old, new, alone], [old, alone]) == ["t1/__base/c.pending"]
    assert spent_records([old, new], [old, new]) == ["t0.pendingset", "t0/_attempt.pendingset"]


def _cancelled(monkeypatch) -> list[str]:
    """The session URIs cancelled from here on (fake-gcs-server answers a cancel of a
    session cancelled or finalized before as it does the first, so the test counts them)."""
    from dataferry.store.gcs.store import GcsStore

    cancelled: list[str] = []
    cancel = GcsStore._abort_upload

    def spy(self, path: str, upload_id: str) -> bool:
        cancelled.append(upload_id)
        return cancel(self, path, upload_id)

    monkeypatch.setattr(GcsStore, "_abort_upload", spy)
    return cancelled


def test_cleanup_cancels_the_sessions_its_pendingsets_alone_name(gcs_url, monkeypatch):
    """A driver that died before deciding its commit, after its tasks committed (and so
    deleted their `.pending` records): `dataferry cleanup` rolls it back from the pendingsets,
    cancelling every session (broken: each session keeps its file's data on GCS for a week,
    unfound, and the job's directory stays)."""
    from dataferry.commit.job.cleanup import cleanup_destination
    from dataferry.commit.s3a.magic.committer import job_dir

    store = open_store(gcs_url)
    c = make_committer("magic-gcs", store)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: ["p=1/a", "p=2/b"], 1: ["p=1/c"]})
    sessions = {
        x.upload_id
        for m in msgs
        for x in read_pendingset_file(store, m.extra["pendingset"]).commits
    }
    assert not [s for s in store.walk("") if s.path.endswith(".pending")]
    cancelled = _cancelled(monkeypatch)
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_back
    assert sessions <= set(cancelled) and len(sessions) == 3
    assert visible(store) == [] and not store.exists(job_dir(job))


def test_a_superseded_attempt_that_commits_last_neither_wins_nor_stays_open(gcs_url, monkeypatch):
    """Two attempts of one task commit, the one the driver did not choose last (it overwrites
    the task's pendingset): job commit finalizes the chosen attempt's session from that
    attempt's own pendingset copy and cancels the other's (broken: the wrong bytes published,
    or the task's file lost, or the other session left open)."""
    from dataferry.commit.s3a.magic.committer import OWN_PENDINGSET, attempt_dir

    store = open_store(gcs_url)
    c = make_committer("magic-gcs", store)
    job = c.new_job()
    c.setup_job(job)
    chosen, late = job.task(0, 0), job.task(0, 1)
    for attempt, data in ((chosen, b"chosen"), (late, b"late")):
        c.setup_task(attempt)
        c.write_file(attempt, "p=1/x", data)
    message = c.commit_task(chosen)
    c.commit_task(late)
    (late_session,) = (
        x.upload_id
        for x in read_pendingset_file(store, f"{attempt_dir(late)}/{OWN_PENDINGSET}").commits
    )
    cancelled = _cancelled(monkeypatch)
    c.commit_job(job, [message])
    assert visible(store) == ["p=1/x"] and store.read_bytes("p=1/x") == b"chosen"
    assert late_session in cancelled


def test_only_magic_gcs_claims_its_jobs_directories_on_gcs(gcs_url):
    """`magic` and `magic-gcs` share S3A's layout: were both to claim a dead job's directory,
    cleanup would recover it twice, once with a committer that cannot run on GCS."""
    from dataferry.commit.s3a.magic.committer import MagicCommitter
    from dataferry.commit.s3a.magic.gcs import GcsMagicCommitter

    store = open_store(gcs_url)
    c = make_committer("magic-gcs", store)
    job = c.new_job()
    c.setup_job(job)
    run_tasks(c, job, {0: ["f"]})
    assert MagicCommitter.leftovers(store) == []
    assert [left.committer for left in GcsMagicCommitter.leftovers(store)] == ["magic-gcs"]
