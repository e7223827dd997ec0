"""Giving up a commit cleanup cannot finish (`job/giveup.py`, `job/cleanup.py`): only when
named, only what failed, and nothing deleted."""

from __future__ import annotations

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.job.giveup import GIVEN_UP_DIR
from dataferry.commit.records.claim import CLAIM_FILE
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ..helpers import run_tasks, visible


def stuck(tmp_path):
    """A decided append that died after publishing two of its four files, its intent record
    then cut short and its claim gone (released by hand): only a leftover job directory."""
    store = open_store(str(tmp_path / "d"), faults=[])
    c = make_committer("manifest", store, io_threads=1)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: ["p=1/a", "p=1/b", "p=1/c", "p=1/d"]})
    rule = FaultRule("crash", when="after", kinds=frozenset({Op.RENAME}), path_glob="*b.*")
    fault_layer(store).add_rule(rule)
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    intent = f"{c.job_dir(job)}/{INTENT_FILE}"
    store.write_bytes(intent, store.read_bytes(intent)[:20])
    store.delete(CLAIM_FILE)
    return store, c.job_dir(job)


def test_a_leftover_cleanup_cannot_finish_is_given_up_only_when_named(tmp_path):
    """Were a failed entry given up unasked, an operator who ran plain `cleanup` would lose
    the commit's all-or-nothing without knowing; were a named one deleted rather than moved
    aside, its unpublished files would be lost for good."""
    store, job_dir = stuck(tmp_path)
    before = visible(store)
    assert before == ["p=1/a", "p=1/b"]

    report = cleanup_destination(store, older_than_s=0)
    assert job_dir in report.failed and not report.given_up
    assert store.exists(job_dir) and visible(store) == before

    other = cleanup_destination(store, older_than_s=0, give_up=["_temporary/other/00"])
    assert job_dir in other.failed and not other.given_up  # only what is named

    done = cleanup_destination(store, older_than_s=0, give_up=[job_dir])
    kept = done.given_up[job_dir]
    assert kept.startswith(f"{GIVEN_UP_DIR}/") and not done.failed
    assert visible(store) == before and not store.exists(job_dir)
    names = sorted(st.path.rsplit("/", 1)[-1] for st in store.walk(kept))
    assert INTENT_FILE in names
    assert sum(n.startswith(("p=1%2Fc.", "p=1%2Fd.")) for n in names) == 2, names  # unpublished
    assert not cleanup_destination(store, older_than_s=0).failed  # nothing refused any more
