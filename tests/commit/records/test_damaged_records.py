"""Damaged commit records: each kind of damage to each record kind gives exactly one
ValidationError naming the file's URL (never a TypeError, KeyError or the like, never a record
taken for absent), and the committers leave the destination as it was and the record in place.

Intent records and claims are covered with their own module."""

from __future__ import annotations

import dataclasses
import json

import msgspec
import pytest

from dataferry import make_committer
from dataferry.commit.direct import records as direct_records
from dataferry.commit.direct.committer import commit_record_path, list_committed
from dataferry.commit.direct.records import CommitRecord, read_commit_record
from dataferry.commit.fileoutput import FileOutputPlan, Move
from dataferry.commit.hive.journal import HivePlan, Journal, Step
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.manifest import files as manifest_files
from dataferry.commit.manifest.carried import CARRIED, carry
from dataferry.commit.manifest.files import FileEntry, TaskManifest, read_manifest
from dataferry.commit.manifest.layout import JobLayout
from dataferry.commit.records import success
from dataferry.commit.records.intent import decode_plan
from dataferry.commit.records.success import SuccessData, read_success
from dataferry.commit.s3a.magic import files as magic_files
from dataferry.commit.s3a.magic.committer import pendingset_path
from dataferry.commit.s3a.magic.files import (
    PendingCommit,
    PendingSet,
    read_pending,
    read_pendingset_file,
)
from dataferry.commit.s3a.staging import records as staging_records
from dataferry.commit.s3a.staging.layout import uploads_record
from dataferry.commit.s3a.staging.records import UploadsRecord
from dataferry.commit.s3a.uploads import Upload, UploadsPlan
from dataferry.errors import InjectedCrash, ValidationError
from dataferry.store import FaultRule, Op, fault_layer, open_store

from ..helpers import run_tasks, visible

# --- each record kind: a good record, how to read it, and what damages it -------------------


def _manifest(store):
    m = TaskManifest(
        job_id="j1",
        job_attempt_number=0,
        task_id="task_1",
        task_attempt_id="attempt_1",
        task_attempt_dir="_temporary/j1/00/tasks/attempt_1",
        files=[FileEntry("_temporary/j1/00/tasks/attempt_1/a", "a", 3)],
    )
    return m.to_json(store)


def _pending(store):
    return PendingCommit("a", "u1", ["e1"], 3, "j1", "t1").to_json(store)


def _pendingset(store):
    return json.loads(
        PendingSet("j1", "attempt_1", [PendingCommit("a", "u1", ["e1"], 3)]).to_bytes(store)
    )


def _uploads(store):
    return json.loads(UploadsRecord("attempt_1", ["a", "b"], {"a": "u1"}).to_bytes())


def _success(store):
    return SuccessData(committer="c", job_id="j1", metrics={"n": 1}).to_json()


def _commit_record(store):
    return json.loads(CommitRecord("uuid1", "job_1", 1.5, ["a", "b"]).to_bytes())


def _set(key, value):
    def damage(d):
        d[key] = value

    return damage


def _drop(key):
    def damage(d):
        del d[key]

    return damage


def _drop_in_commit(key):
    def damage(d):
        del d["commits"][0][key]

    return damage


# kind: (path, make, read, cap (module, name), wrong types, missing field, unknown version)
KINDS = {
    "manifest": (
        "task_1-manifest.json",
        _manifest,
        read_manifest,
        (manifest_files, "MANIFEST_MAX_BYTES"),
        [
            _set("files", 5),
            _set("jobAttemptNumber", "0"),
            _set("iostatistics", []),
            _set("taskAttemptDir", 7),
        ],
        _drop("taskAttemptID"),
        _set("version", 2),
    ),
    "pending": (
        "a.pending",
        _pending,
        read_pending,
        (magic_files, "PENDING_MAX_BYTES"),
        [_set("length", "3"), _set("created", "now"), _set("jobId", 5)],
        _drop("uploadId"),
        _set("version", 99),
    ),
    "pendingset": (
        "task_1.pendingset",
        _pendingset,
        read_pendingset_file,
        (magic_files, "PENDINGSET_MAX_BYTES"),
        [_set("commits", 5), _set("extraData", []), _set("jobId", 5)],
        _drop_in_commit("uri"),
        _set("version", 1),
    ),
    "uploads record": (
        "tasks/attempt_1.uploads",
        _uploads,
        lambda store, path: UploadsRecord.load(store, path),
        (staging_records, "UPLOADS_RECORD_MAX_BYTES"),
        [_set("keys", "ab"), _set("uploads", ["a"]), _set("keys", [1])],
        _drop("keys"),
        _set("version", 2),
    ),
    "_SUCCESS": (
        "_SUCCESS",
        _success,
        read_success,
        (success, "SUCCESS_MAX_BYTES"),
        [
            _set("metrics", {"n": "1"}),
            _set("state", 5),
            _set("metrics", {"n": float("inf")}),
        ],
        _drop("name"),
        _set("name", "org.apache.hadoop.fs.s3a.commit.files.SuccessData/2"),
    ),
    "commit record": (
        commit_record_path("uuid1"),
        _commit_record,
        lambda store, path: read_commit_record(store, path, "uuid1"),
        (direct_records, "COMMIT_RECORD_MAX_BYTES"),
        [_set("files", "ab"), _set("files", [1]), _set("jobId", "uuid2")],
        _drop("files"),
        _set("version", 2),
    ),
}
DAMAGES = [
    "truncated",
    "not utf-8",
    "not an object",
    "wrong type",
    "missing",
    "version",
    "directory",
    "oversized",
]


@pytest.fixture
def store(tmp_path):
    return open_store(str(tmp_path / "d"))


def one_error(call, url):
    with pytest.raises(ValidationError) as e:
        call()
    assert url in str(e.value)
    return e.value


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_damage_gives_one_validation_error_naming_the_file(store, monkeypatch, kind, damage):
    path, make, read, (module, cap), wrong, missing, version = KINDS[kind]
    good = make(store)
    store.write_bytes(path, json.dumps(good).encode())
    read(store, path)  # the good record reads
    url = store.full_url(path)
    cases: list[bytes] = []
    if damage == "truncated":
        raw = json.dumps(good).encode()
        cases = [raw[: len(raw) // 2], raw[:-1]]
    elif damage == "not utf-8":
        cases = [b'{"a": "\xff\xfe"}']
    elif damage == "not an object":
        cases = [b"[]", b"3"]
    elif damage in ("wrong type", "missing", "version"):
        for fn in {"wrong type": wrong, "missing": [missing], "version": [version]}[damage]:
            d = json.loads(json.dumps(good))
            fn(d)
            cases.append(json.dumps(d).encode())
    elif damage == "directory":
        store.delete(path)
        store.write_bytes(f"{path}/inside", b"{}")
        one_error(lambda: read(store, path), url)
        return
    elif damage == "oversized":
        monkeypatch.setattr(module, cap, len(json.dumps(good)) - 1)
        one_error(lambda: read(store, path), url)
        return
    for raw in cases:
        store.write_bytes(path, raw)
        one_error(lambda: read(store, path), url)


def test_an_absent_record_is_told_apart_from_a_damaged_one(store):
    assert read_success(store) is None
    assert UploadsRecord.load(store, "tasks/none.uploads") is None
    store.write_bytes("_SUCCESS", b"")
    assert read_success(store).legacy  # the classic empty marker is no damage


def journal_json():
    step = Step("aside", "p=1", "x/p=1", True)
    j = Journal(job_id="job_1", mode="overwrite", table="t", partitions=["p=1"], steps=[step])
    return msgspec.to_builtins(j)


def hive_plan(journal):
    return {"journal": journal, "catalog": "", "files": 0}


@pytest.mark.parametrize(
    "damage",
    [
        _set("steps", 5),
        _set("steps", ["x"]),
        _set("partitions", [1]),
        _drop("mode"),
        lambda d: d["steps"][0].update(phase="sideways"),
        lambda d: d["steps"][0].update(directory="yes"),
        lambda d: d["steps"][0].pop("dst"),
    ],
)
def test_a_damaged_load_journal_gives_one_validation_error(damage):
    """Hive's journal is decoded as its plan: a damaged one is refused naming the record and
    the journal's field (were it not, a load would run or be undone from a broken journal)."""
    decode_plan(hive_plan(journal_json()), HivePlan, "file:///t/intent")
    d = journal_json()
    damage(d)
    e = one_error(
        lambda: decode_plan(hive_plan(d), HivePlan, "file:///t/intent"), "file:///t/intent"
    )
    assert e.field.startswith("payload.journal."), e


# --- what the committers do with a damaged record ----------------------------------------------


def manifest_job(store):
    c = make_committer("manifest", store, io_threads=1)
    job = c.new_job()
    c.setup_job(job)
    return c, job


@pytest.mark.parametrize("carried", [False, True], ids=["saved", "carried"])
def test_manifest_job_commit_with_a_damaged_manifest_fails_and_changes_nothing(tmp_path, carried):
    """A damaged manifest, as saved (the message carries no copy: too large to) or as its
    message carries it: the job commit fails naming it and changes nothing."""
    store = open_store(str(tmp_path / "d"))
    store.write_bytes("old", b"earlier data")
    c, job = manifest_job(store)
    msgs = run_tasks(c, job, {0: ["p=1/a"], 1: ["p=1/b"]})
    path = JobLayout.of(job).manifest_path(msgs[1].task_id)
    damaged = store.read_bytes(path)[:-20]
    store.write_bytes(path, damaged)
    extra = {k: v for k, v in msgs[1].extra.items() if k != CARRIED}
    if carried:
        extra[CARRIED] = carry(damaged)
    msgs[1] = dataclasses.replace(msgs[1], extra=extra)
    one_error(lambda: c.commit_job(job, msgs), store.full_url(path))
    assert visible(store) == ["old"] and not store.exists("_SUCCESS")
    assert store.read_bytes(path) == damaged  # left in place, for someone to look at


def test_manifest_job_commit_takes_the_carried_manifest_not_the_saved_one(tmp_path):
    """A message carries its task's manifest as saved: the job commit commits from that copy
    and does not read the saved file back (here damaged after the task's commit)."""
    store = open_store(str(tmp_path / "d"))
    c, job = manifest_job(store)
    msgs = run_tasks(c, job, {0: ["p=1/a"], 1: ["p=1/b"]})
    path = JobLayout.of(job).manifest_path(msgs[1].task_id)
    store.write_bytes(path, store.read_bytes(path)[:-20])
    c.commit_job(job, msgs)
    assert visible(store) == ["p=1/a", "p=1/b"] and store.exists("_SUCCESS")


def decided_manifest_job(tmp_path):
    """A manifest job that died after its intent record, before its first rename."""
    store = open_store(str(tmp_path / "d"), faults=[])
    c, job = manifest_job(store)
    msgs = run_tasks(c, job, {0: ["p=1/a"], 1: ["p=2/b"], 2: ["p=3/c"]})
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="before", kinds=frozenset({Op.RENAME}), times=1)
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert visible(store) == []
    return store, f"{c.job_dir(job)}/_commit_entries.jsonl"


@pytest.mark.parametrize("damage", ["last line gone", "a line broken"])
def test_a_decided_manifest_commit_with_damaged_entries_is_left_in_place(tmp_path, damage):
    store, entries = decided_manifest_job(tmp_path)
    raw = store.read_bytes(entries)
    lines = raw.splitlines(keepends=True)
    assert len(lines) == 3
    if damage == "last line gone":  # cut short at a line's end: every line left parses
        damaged = b"".join(lines[:-1])
    else:  # damaged in place, same size
        damaged = raw.replace(b'"a"', b'"!"', 1).replace(b"[[", b"[{", 1)
    store.write_bytes(entries, damaged)
    report = cleanup_destination(store, older_than_s=0)
    assert report.failed and store.full_url(entries) in next(iter(report.failed.values()))
    assert visible(store) == [] and not store.exists("_SUCCESS")
    assert store.read_bytes(entries) == damaged


def direct_job_committed(tmp_path):
    store = open_store(str(tmp_path / "d"))
    c = make_committer("direct", store)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    written = c.write_file(t, "p=1/a.parquet", b"data")
    c.commit_job(job, [c.commit_task(t)])
    return store, c, job, written


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(files="ab"),  # a string is a list of letters to a careless reader
        lambda d: d.update(jobId="another-job"),
        lambda d: d.update(version=2),
    ],
)
def test_direct_rollback_with_a_damaged_commit_record_deletes_nothing(tmp_path, damage):
    store, c, job, written = direct_job_committed(tmp_path)
    record = commit_record_path(job.job_uuid)
    d = json.loads(store.read_bytes(record))
    damage(d)
    store.write_bytes(record, json.dumps(d).encode())
    # a marker left for the committed file (its deletion was cut short): cleanup rolls back
    c.markers(job).create("p=1", written.rsplit("/", 1)[1])
    report = cleanup_destination(store, older_than_s=0)
    assert report.failed and store.full_url(record) in next(iter(report.failed.values()))
    assert store.read_bytes(written) == b"data"
    one_error(lambda: list_committed(store), store.full_url(record))


def sim_s3(tmp_path):
    return open_store(f"sim:s3:{tmp_path / 'dest'}", latency_scale=0.0)


def test_magic_job_commit_with_a_damaged_pendingset_fails_and_changes_nothing(tmp_path):
    store = sim_s3(tmp_path)
    c = make_committer("magic", store)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "p=1/a", b"data")
    msg = c.commit_task(t)
    path = pendingset_path(job, msg.task_id)
    d = json.loads(store.read_bytes(path))
    d["commits"][0]["etags"] = "e1"
    store.write_bytes(path, json.dumps(d).encode())
    one_error(lambda: c.commit_job(job, [msg]), store.full_url(path))
    assert not store.exists("p=1/a") and not store.exists("_SUCCESS")
    assert json.loads(store.read_bytes(path)) == d
    assert [u.path for u in store.list_uploads("")] == ["p=1/a"]  # still pending, not lost


def test_staging_cleanup_with_a_damaged_uploads_record_keeps_it_and_its_uploads(tmp_path):
    store = sim_s3(tmp_path)
    c = make_committer("directory", store, staging_dir=str(tmp_path / "staging"))
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "a", b"data")
    c.commit_task(t)  # the job never commits: cleanup rolls it back
    record = uploads_record(t)
    store.write_bytes(record, b'{"attempt": "x", "keys": "a"}')
    report = cleanup_destination(store, older_than_s=0)
    assert report.failed and store.full_url(record) in next(iter(report.failed.values()))
    assert store.exists(record) and not store.exists("a")
    assert [u.path for u in store.list_uploads("")] == ["a"]  # named by nothing else


@pytest.mark.parametrize(
    "row",
    [
        None,
        [],
        ["a", "b", 0],
        ["a", "", 0, 0],
        ["a", "b", "yes", 0],
        [1, "b", 0, 0],
        ["a", "b", 2, 0],
    ],
)
def test_a_damaged_v1_move_row_gives_one_validation_error(row):
    def plan(move):
        return {"moves": [move], "files": 1, "bytes": 1, "filenames": ["b"]}

    good = decode_plan(plan(["a", "b", 1, 0]), FileOutputPlan, "file:///i")
    assert good.moves == [Move("a", "b", 1, 0)]
    e = one_error(lambda: decode_plan(plan(row), FileOutputPlan, "file:///i"), "file:///i")
    assert e.field.startswith("payload.moves[0]"), e


@pytest.mark.parametrize(
    "row",
    [
        None,
        ["a", "u", ["e"]],
        ["a", "u", "e", 1],
        ["a", "u", [], 1],
        ["a", 5, ["e"], 1],
        ["a", "u", ["e"], -1],
    ],
)
def test_a_damaged_upload_row_gives_one_validation_error(row):
    def plan(upload):
        return {"uploads": [upload], "attempts": ["a1"], "replace_files": []}

    good = decode_plan(plan(["a", "u", ["e"], 1]), UploadsPlan, "file:///i")
    assert good.uploads == [Upload("a", "u", ["e"], 1)]
    e = one_error(lambda: decode_plan(plan(row), UploadsPlan, "file:///i"), "file:///i")
    assert e.field.startswith("payload.uploads[0]"), e
