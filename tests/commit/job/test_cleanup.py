"""`dataferry cleanup`'s report: a dry run says exactly what the real run then does, rolled
forward or back, for the dead job's directory and for the claim it held."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dataferry import make_committer
from dataferry.cli import app
from dataferry.commit.job.cleanup import CLAIM_PATH, cleanup_destination
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ..helpers import run_tasks

FILES = {0: ["p=0/a"], 1: ["p=1/b"]}


def dead_commit(tmp_path, when: str):
    """A manifest job whose driver died just `when` ("before", "after") its intent record."""
    store = open_store(str(tmp_path / "dest"), faults=[])
    c = make_committer("manifest", store)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, FILES)
    glob = f"{c.job_dir(job)}/{INTENT_FILE}"
    rule = FaultRule(action="crash", when=when, kinds=frozenset({Op.WRITE}), path_glob=glob)
    fault_layer(store).add_rule(rule)
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    return store


@pytest.mark.parametrize(("when", "way"), [("after", "rolled forward"), ("before", "rolled back")])
def test_a_dry_run_says_which_way_each_entry_goes_and_the_real_run_goes_that_way(
    tmp_path, when, way
):
    store = dead_commit(tmp_path, when)
    dry = cleanup_destination(store, older_than_s=0, dry_run=True)
    assert dry.planned and set(dry.planned.values()) == {way}, dry.planned
    real = cleanup_destination(store, older_than_s=0)
    done = real.rolled_forward if way == "rolled forward" else real.rolled_back
    assert set(dry.planned) <= set(done), (dry.planned, real)
    assert set(dry.planned) <= set(real.found)  # and reports each entry the dry run named
    if CLAIM_PATH in dry.planned:  # the claim's row says which way its holder's commit went
        assert CLAIM_PATH in done


def test_the_command_line_words_a_dry_run_as_the_real_run_will_act(tmp_path):
    store = dead_commit(tmp_path, "after")
    dest = str(tmp_path / "dest")
    dry = CliRunner().invoke(app, ["cleanup", dest, "--older-than", "0s", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would be rolled forward" in dry.output and "would be recovered" not in dry.output
    real = CliRunner().invoke(app, ["cleanup", dest, "--older-than", "0s"])
    assert real.exit_code == 0, real.output
    assert "rolled forward" in real.output and store.exists("_SUCCESS")


def test_a_dry_run_with_rollback_says_what_recovery_does_for_a_committer_that_cannot_undo(
    tmp_path,
):
    # --rollback undoes only what can be undone (Hive's decided loads); a decided manifest
    # commit is still finished, and the dry run must say so
    store = dead_commit(tmp_path, "after")
    dry = cleanup_destination(store, older_than_s=0, dry_run=True, rollback=True)
    assert set(dry.planned.values()) == {"rolled forward"}, dry.planned
    real = cleanup_destination(store, older_than_s=0, rollback=True)
    assert set(dry.planned) <= set(real.rolled_forward), (dry.planned, real)


@pytest.mark.parametrize(("when", "verb"), [("after", "published"), ("before", "removed")])
def test_the_report_counts_each_jobs_files_and_the_dry_run_counts_the_same(tmp_path, when, verb):
    """Per job: rolled forward (n files published) or rolled back (n removed), the same number
    in the dry run as in the real run."""
    dead_commit(tmp_path, when)
    dest = str(tmp_path / "dest")
    dry = CliRunner().invoke(app, ["cleanup", dest, "--older-than", "0s", "--dry-run"])
    real = CliRunner().invoke(app, ["cleanup", dest, "--older-than", "0s"])
    assert dry.exit_code == 0 and real.exit_code == 0, (dry.output, real.output)
    words = f"({sum(len(f) for f in FILES.values())} files {verb})"
    assert words in dry.output and words in real.output, (dry.output, real.output)


@pytest.mark.parametrize("command", [["cleanup", "DEST"], ["uploads", "abort", "DEST"]])
def test_a_bad_age_is_bad_usage(tmp_path, command):
    """A value that is not a duration exits 2 (bad usage), naming the option and the value."""
    argv = [str(tmp_path) if a == "DEST" else a for a in command]
    result = CliRunner().invoke(app, [*argv, "--older-than", "banana"])
    assert result.exit_code == 2, result.output
    assert "--older-than" in result.output and "banana" in result.output
