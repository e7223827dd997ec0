"""`dataferry cleanup` refuses to act on a decided commit it cannot finish (its intent record
damaged, a file it must move gone); its report names the entry and the command that gives the
commit up, and that command frees the destination, deleting nothing."""

from __future__ import annotations

import json
import os
import re

import pytest
from typer.testing import CliRunner

from dataferry import make_committer
from dataferry.cli import app
from dataferry.commit.job.giveup import GIVEN_UP_DIR
from dataferry.commit.records.claim import CLAIM_FILE
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ..commit.helpers import run_tasks, visible

runner = CliRunner()
NEW = [f"p=1/f{i}" for i in range(6)]


def stuck_overwrite(tmp_path, damage: str):
    """A decided overwrite that died part way through publishing (the earlier data already
    deleted), then damaged: its intent record cut short, or a file it must still move gone.
    Returns (destination path, store, the job's directory)."""
    dest = str(tmp_path / "d")
    store = open_store(dest, faults=[])
    old = make_committer("manifest", store)
    old_job = old.new_job()
    old.setup_job(old_job)
    old.commit_job(old_job, run_tasks(old, old_job, {0: ["p=0/old"]}))
    c = make_committer("manifest", store, mode="overwrite", io_threads=1)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: NEW})
    rule = FaultRule("crash", when="after", kinds=frozenset({Op.RENAME}), path_glob="*f2.*")
    fault_layer(store).add_rule(rule)
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    job_dir = c.job_dir(job)
    if damage == "damaged intent":
        raw = store.read_bytes(f"{job_dir}/{INTENT_FILE}")
        store.write_bytes(f"{job_dir}/{INTENT_FILE}", raw[: len(raw) // 2])
    else:
        store.delete(c.attempt_path(job.task(0), "p=1/f5"))
    return dest, store, job_dir


@pytest.mark.parametrize("damage", ["damaged intent", "a file to move is gone"])
def test_the_report_names_the_way_out_and_giving_up_frees_the_destination(tmp_path, damage):
    """Without a way out, a decided commit cleanup cannot finish blocks every later job into
    the destination until someone deletes files by hand, guessing which. The report names the
    entry and the `--give-up` command with what it gives up; the command keeps the destination
    as the commit left it, moves the job's directory aside (nothing deleted), and the next job
    commits."""
    dest, store, job_dir = stuck_overwrite(tmp_path, damage)
    published = visible(store)
    assert published and "p=0/old" not in published

    refused = runner.invoke(app, ["cleanup", dest, "--older-than", "0s"])
    assert refused.exit_code == 1, refused.output
    text = " ".join(refused.output.split())  # the table wraps long cells
    assert "LEFT IN PLACE" in text
    command = re.search(r"`(dataferry cleanup \S+ --give-up (\S+))`", text)
    assert command is not None, text
    assert command.group(2) == job_dir
    assert "readers then see the destination as the commit left it" in text
    assert "_dataferry/given-up/" in text
    if damage == "damaged intent":
        assert visible(store) == published  # nothing decided from a record it cannot read
    else:
        published = visible(store)  # it moved what it could, then stopped at the gone file
    assert store.exists(CLAIM_FILE) and store.exists(job_dir)

    blocked = make_committer("manifest", store, mode="append")  # every later job fails
    bj = blocked.new_job()
    blocked.setup_job(bj)
    with pytest.raises(Exception, match="_temporary"):
        blocked.commit_job(bj, run_tasks(blocked, bj, {0: ["p=2/x"]}))

    dry = runner.invoke(app, ["cleanup", dest, "--give-up", job_dir, "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    said = json.loads(dry.stdout)
    # a damaged record shows in the dry run; a gone file only when the commit is finished
    assert job_dir in (said["given_up"] if damage == "damaged intent" else said["planned"])
    assert store.exists(job_dir) and visible(store) == published  # a dry run changes nothing

    out = runner.invoke(app, ["cleanup", dest, "--give-up", job_dir, "--json"])
    assert out.exit_code == 0, out.output
    kept = json.loads(out.stdout)["given_up"][job_dir]
    assert kept.startswith(f"{GIVEN_UP_DIR}/")
    assert visible(store) == published  # as the commit left it
    assert not store.exists(job_dir) and not store.exists(CLAIM_FILE)
    kept_files = [st.path for st in store.walk(kept)]
    assert any(p.endswith(INTENT_FILE) for p in kept_files)  # its record, kept
    unpublished = [n for n in NEW if n not in published and not n.endswith("f5")]
    for name in unpublished:  # and the files it had not published (f5: the one that is gone)
        flat = name.replace("/", "%2F") + "."  # its name in flight (`p=1%2Ff3.flat.inflight`)
        assert sum(p.rsplit("/", 1)[-1].startswith(flat) for p in kept_files) == 1, name
    assert unpublished or damage != "damaged intent"

    again = runner.invoke(app, ["cleanup", dest, "--older-than", "0s"])
    assert again.exit_code == 0, again.output  # nothing left to refuse
    later = make_committer("manifest", store, mode="append")
    lj = later.new_job()
    later.setup_job(lj)
    later.commit_job(lj, run_tasks(later, lj, {0: ["p=2/x"]}))
    assert visible(store) == sorted([*published, "p=2/x"])
    assert store.exists(kept)  # the operator's to delete


def test_an_entry_cleanup_can_finish_is_not_given_up(tmp_path):
    """`--give-up` is for what cleanup cannot finish: naming anything else gives up nothing
    and says so (exit 1), so a typo never passes for a done deed."""
    dest = str(tmp_path / "d")
    os.makedirs(dest)
    out = runner.invoke(app, ["cleanup", dest, "--give-up", "_temporary/nosuch/00"])
    assert out.exit_code == 1, out.output
    assert "not given up" in out.output


def test_a_damaged_claim_is_left_with_the_way_out_and_older_than_0_removes_it(tmp_path):
    """A damaged claim blocks every job until it is old enough; the report says how to remove
    it now, and that command does."""
    dest = str(tmp_path / "d")
    store = open_store(dest)
    store.write_bytes(CLAIM_FILE, b'{"job_id": 7')  # cut short
    left = runner.invoke(app, ["cleanup", dest])
    assert left.exit_code == 0, left.output
    assert "--older-than 0" in " ".join(left.output.split()) and store.exists(CLAIM_FILE)
    gone = runner.invoke(app, ["cleanup", dest, "--older-than", "0"])
    assert gone.exit_code == 0, gone.output
    assert not store.exists(CLAIM_FILE)
