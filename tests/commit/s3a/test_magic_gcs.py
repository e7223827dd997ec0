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
    # a .pending a file (no marker: GCS cannot list sessions by key) and a claim a task
    tasks = [s.path.split("/tasks/", 1)[1] for s in store.walk("") if "/tasks/" in s.path]
    assert sorted(p.rsplit("/", 1)[-1] for p in tasks) == [
        "_attempt",
        "_attempt",
        "big.pending",
        "small.pending",
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
    """GCS cannot list sessions: `uploads list|abort` read them from the jobs' records. Without
    that a dead job's open sessions (each holding the task's data) could not be found."""
    store = open_store(gcs_url)
    c = make_committer("magic-gcs", store)
    job = c.new_job()
    c.setup_job(job)
    run_tasks(c, job, {0: ["one"], 1: ["two"]})
    res = CliRunner().invoke(app, ["uploads", "list", gcs_url, "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.stdout)
    assert sorted(u["path"] for u in listed) == ["one", "two"]
    assert all(u["upload_id"].startswith("http") for u in listed)
    res = CliRunner().invoke(app, ["uploads", "abort", gcs_url, "--older-than", "0s"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["uploads", "list", gcs_url, "--json"])
    assert json.loads(res.stdout) == []
    assert visible(store) == []


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
