"""An intent record that is there but cannot be read is never taken as "no decision"
(`records/intent.py`, `job/recovery.py`): the job directory is left in place and reported."""

from __future__ import annotations

import os

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.intent import (
    INTENT_FILE,
    INTENT_MAX_BYTES,
    DamagedRecord,
    load_intent,
)
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ..helpers import run_tasks, visible


def damage(store, root, path: str, kind: str) -> None:
    """Leave the intent record at `path` (under local directory `root`) damaged in one way."""
    full = os.path.join(root, path)
    raw = store.read_bytes(path)
    if kind == "truncated":
        store.write_bytes(path, raw[: len(raw) // 2])
    elif kind == "garbage":
        store.write_bytes(path, b"\x00\xff not a record \x13" * 8)
    elif kind == "over its size cap":
        os.truncate(full, INTENT_MAX_BYTES + 1)  # sparse: its first bytes still the record
    elif kind == "a directory":
        store.delete(path)
        store.mkdirs(f"{path}/inside")
    elif kind == "a read the store refuses":
        layer = fault_layer(store)
        layer.rules = [
            FaultRule("deny", kinds=frozenset({Op.READ}), path_glob=f"*{INTENT_FILE}", times=-1)
        ]
        layer.armed = True
    else:
        raise AssertionError(kind)


KINDS = ["truncated", "garbage", "over its size cap", "a directory", "a read the store refuses"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_decided_overwrite_with_an_unreadable_intent_is_left_never_rolled_back(tmp_path, kind):
    """An overwrite that died after deleting the earlier data set, its intent record then
    damaged. Were an unreadable record taken as "no decision", recovery (the next job, or
    `dataferry cleanup`) would roll the job back: the new files deleted too, and the user left
    with neither the earlier data nor the new. It must be left in place, named in the report."""
    store = open_store(str(tmp_path / "d"), faults=[])
    old = make_committer("manifest", store)
    old_job = old.new_job()
    old.setup_job(old_job)
    old.commit_job(old_job, run_tasks(old, old_job, {0: ["p=0/old"]}))
    c = make_committer("manifest", store, mode="overwrite", io_threads=1)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: [f"p=1/f{i}" for i in range(6)]})
    fault_layer(store).add_rule(
        FaultRule(
            action="crash", when="after", kinds=frozenset({Op.RENAME}), path_glob="*f2.*inflight"
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    before = visible(store)
    assert "p=0/old" not in before and before  # the earlier data is gone, some new is in
    intent = f"{c.job_dir(job)}/{INTENT_FILE}"
    damage(store, tmp_path / "d", intent, kind)

    with pytest.raises(DamagedRecord, match=INTENT_FILE):
        load_intent(store, c.job_dir(job))
    report = cleanup_destination(store, older_than_s=0)
    assert not report.rolled_back and not report.rolled_forward, report
    assert any(INTENT_FILE in why for why in report.failed.values()), report
    assert visible(store) == before and store.exists(intent)  # nothing rolled back

    again = make_committer("manifest", store, mode="append")  # the next job gives way too
    next_job = again.new_job()
    again.setup_job(next_job)
    with pytest.raises(Exception, match=INTENT_FILE):
        again.commit_job(next_job, run_tasks(again, next_job, {0: ["p=2/next"]}))
    assert visible(store) == before


def test_on_an_object_store_keys_under_the_records_name_are_a_damaged_record(s3_url):
    """An object store has no directories: the record gone and keys under its name is what a
    file system shows as a directory in its place. Taken as "no decision", cleanup rolled a
    decided overwrite back (the referee's damaged_intent on the S3 test server: 2 of 24), and
    an overwrite that had deleted the earlier data lost the new data too."""
    from dataferry.commit.records.intent import DamagedRecord, intent_path, load_intent
    from dataferry.store import open_store

    store = open_store(s3_url)
    job_dir = "_dataferry/jobs/job-1"
    assert load_intent(store, job_dir) is None  # nothing there: no decision
    store.write_bytes(intent_path(job_dir) + "/part", b"x")
    with pytest.raises(DamagedRecord, match="directory"):
        load_intent(store, job_dir)
