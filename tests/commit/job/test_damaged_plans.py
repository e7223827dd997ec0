"""A decided commit whose plan is damaged replaces nothing: the committer's `check_intent`
runs before the write mode's replace (`jobcommit.finish_commit`)."""

from __future__ import annotations

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.intent import INTENT_FILE, Intent
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ..helpers import run_tasks, visible


def run(store, name, mode, layout):
    c = make_committer(name, store, mode=mode)
    job = c.new_job()
    c.setup_job(job)
    return c, job, run_tasks(c, job, layout)


def damage_plan(store, c, job, name):
    """Truncate the entries file (manifest) or break the planned moves (v1)."""
    path = f"{c.job_dir(job)}/{INTENT_FILE}"
    intent = Intent.from_bytes(store.read_bytes(path), path)
    if name == "manifest":
        entries = intent.payload["entries"]
        raw = store.read_bytes(entries)
        store.write_bytes(entries, raw[: len(raw) // 2])
        return
    intent.payload["moves"] = "not a plan"
    store.write_bytes(path, intent.to_bytes())


@pytest.mark.parametrize("name", ["manifest", "v1"])
def test_a_damaged_plan_leaves_the_earlier_data_set_whole(tmp_path, name):
    store = open_store(str(tmp_path / "d"), faults=[])
    c, job, msgs = run(store, name, "append", {0: ["p=0/old"], 1: ["p=1/old"]})
    c.commit_job(job, msgs)
    before = visible(store)
    c, job, msgs = run(store, name, "overwrite", {0: ["p=2/new"]})
    fault_layer(store).add_rule(
        FaultRule(
            action="crash",
            when="after",
            kinds=frozenset({Op.WRITE}),
            path_glob="*_commit_intent.json",
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)  # decided, then "died" before anything visible changed
    fault_layer(store).armed = False
    damage_plan(store, c, job, name)
    report = cleanup_destination(store)
    assert report.failed, report
    assert visible(store) == before  # nothing replaced on a plan that cannot be carried out
