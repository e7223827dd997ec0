"""Typed commit plans (`protocol/plans.py`): each committer's plan is a frozen struct, decoded
with strict types whenever its intent record is read. A plan damaged in one field is refused,
naming the record and the field, before anything a reader sees changes; a record in the shape
the previous version wrote still loads and finishes."""

from __future__ import annotations

import json

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.protocol import CommitPlan, Plan, plan_type_of
from dataferry.commit.records.intent import INTENT_FILE, DamagedRecord, load_intent
from dataferry.commit.registry import KNOWN
from dataferry.errors import CommitError, InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store
from tests.commit.plan_damage import drop_field, set_field

from ..helpers import run_job, run_tasks, visible

COMMITTERS = ["manifest", "v1", "magic", "hive", "direct"]

# the keys each committer's plan had in the previous version's records (a dict then)
OLD_KEYS = {
    "manifest": {"entries", "manifests", "files", "bytes", "task_attempts", "directories"}
    | {"replace_files"},  # and `entries_bytes`, absent in records of older versions still
    "v1": {"moves", "files", "bytes", "filenames"},
    "magic": {"uploads", "attempts", "replace_files"},
    "hive": {"journal", "catalog", "files"},
    "direct": {"files", "stray", "marked"},
}


# committer -> (damage, the field the error names), a wrong type and a missing field each
DAMAGES = {
    "manifest": [
        (set_field(["files"], "3"), "payload.files"),
        (drop_field(["entries"]), "payload.entries"),
    ],
    "v1": [
        (set_field(["moves", 0, 2], "yes"), "payload.moves[0][2]"),
        (drop_field(["filenames"]), "payload.filenames"),
    ],
    "magic": [
        (set_field(["uploads", 0, 3], "12"), "payload.uploads[0][3]"),
        (drop_field(["attempts"]), "payload.attempts"),
    ],
    "hive": [
        (
            set_field(["journal", "steps", 0, "directory"], "yes"),
            "payload.journal.steps[0].directory",
        ),
        (drop_field(["journal", "mode"]), "payload.journal.mode"),
    ],
    "direct": [
        (set_field(["marked"], 2.0), "payload.marked"),
        (drop_field(["stray"]), "payload.stray"),
    ],
}
CASES = [(name, i) for name in COMMITTERS for i in range(2)]


def store_for(name, tmp_path, request):
    if name == "magic":  # multipart uploads: the S3 test server
        return open_store(request.getfixturevalue("s3_url"), faults=[])
    return open_store(str(tmp_path / "d"), faults=[])


def decided_overwrite(store, name):
    """An earlier data set, then an overwrite of it that dies right after its intent record
    is written (decided; nothing replaced yet). Returns the committer, job, record path and
    the earlier data set's files with their bytes."""
    run_job(make_committer(name, store), {0: ["p=0/old"], 1: ["p=1/old"]})
    before = {path: store.read_bytes(path) for path in visible(store)}
    assert before
    c = make_committer(name, store, mode="overwrite")
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: ["p=0/new"]})
    record = f"{c.job_dir(job)}/{INTENT_FILE}"
    fault_layer(store).add_rule(
        FaultRule(
            action="crash",
            when="after",
            kinds=frozenset({Op.WRITE}),
            predicate=lambda _i, _op, path: path.endswith(record),
        )
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert store.exists(record)
    return c, job, record, before


def rewrite_payload(store, record, change):
    data = json.loads(store.read_bytes(record))
    change(data["payload"])
    store.write_bytes(record, json.dumps(data, separators=(",", ":")).encode())


@pytest.mark.parametrize(("name", "case"), CASES)
def test_a_damaged_plan_is_refused_naming_the_record_and_field(tmp_path, request, name, case):
    """A decided overwrite whose plan has one field of the wrong type, or one missing. Were it
    read as a dict and finished, the earlier data set would be deleted (the replace runs
    first) before the bad field was ever looked at, leaving the user a broken data set; it
    must be refused as it is read, naming the record and the field, with nothing changed."""
    store = store_for(name, tmp_path, request)
    c, job, record, before = decided_overwrite(store, name)
    damage, field = DAMAGES[name][case]
    rewrite_payload(store, record, damage)

    with pytest.raises(DamagedRecord) as e:
        load_intent(store, c.job_dir(job), plan_type_of(c))
    assert e.value.field == field
    assert store.full_url(record) in str(e.value)
    report = cleanup_destination(store, older_than_s=0)
    assert report.failed and not report.rolled_forward, report
    assert {path: store.read_bytes(path) for path in before} == before
    assert store.exists(record)  # left in place, for someone to look at


@pytest.mark.parametrize("name", COMMITTERS)
def test_a_record_of_the_previous_version_loads_and_finishes(tmp_path, request, name):
    """A commit decided by the previous version (its plan a dict with today's field names,
    written by `json`) is finished by this one. Were a field renamed or made required
    without a default, an upgrade would leave every commit that died before it unfinishable."""
    store = store_for(name, tmp_path, request)
    record = decided_overwrite(store, name)[2]
    payload = json.loads(store.read_bytes(record))["payload"]
    assert OLD_KEYS[name] <= set(payload)  # the field names stay those of earlier records
    rewrite_payload(store, record, lambda p: [p.pop(k) for k in set(p) - OLD_KEYS[name]])

    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_forward and not report.failed, report
    after = visible(store)
    assert any("new" in path for path in after), after
    assert not any("p=0/old" in path for path in after), after  # overwritten
    assert not store.exists(record)


def test_every_committer_declares_a_plan_type():
    """A committer without a plan type writes and reads its plan as an unchecked dict: a
    damaged record would then be carried out. Every committer, tables included, declares one."""
    for spec in KNOWN.values():
        cls = spec.committer_class()
        assert cls.plan_type is not None and issubclass(cls.plan_type, Plan), spec.name
        assert cls.plan_type.__struct_config__.frozen, spec.name


def test_a_plan_not_of_the_declared_type_is_refused_before_the_decision(tmp_path):
    """A committer whose plan_commit returns something other than its plan type would save a
    record recovery cannot read; the job commit refuses it before the intent is written."""
    store = open_store(str(tmp_path / "d"))
    c = make_committer("v1", store)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: ["a"]})
    plan_commit = c.plan_commit
    c.plan_commit = lambda *a: CommitPlan({"moves": []}, plan_commit(*a).files)
    with pytest.raises(CommitError, match="FileOutputPlan"):
        c.commit_job(job, msgs)
    assert not store.exists(f"{c.job_dir(job)}/{INTENT_FILE}")
    assert visible(store) == []
