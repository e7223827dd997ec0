"""Typed table plans (`commit/table/plan.py`, a struct per format): a table job's intent
record is decoded as its format's plan type with strict types. A plan damaged in one field is
refused as it is read, naming the record and the field; recovery then settles the job from
the table itself (`landed_in_destination`), as for a record damaged any other way. A record
in the shape the previous version wrote (a dict then) still loads and finishes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.protocol import plan_type_of
from dataferry.commit.records.intent import INTENT_FILE, DamagedRecord, load_intent
from dataferry.commit.table.registry import FORMATS as TABLE_FORMATS
from dataferry.errors import InjectedCrash, JobCommitError
from dataferry.store import FaultRule, Op, open_store
from tests.commit.plan_damage import drop_field, set_field

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

FORMATS = list(TABLE_FORMATS)

# the keys of each format's plan in the previous version's records (a dict then)
OLD_KEYS = {"files", "stray", "marked", "facts", "schema", "partition_by", "table"}
OLD_TABLE_KEYS = {
    "delta": {"app_id", "created"},
    "iceberg": {"where", "created", "read_snapshot_id"},
    "hudi": {"instant", "action", "operation"},
}


# format -> (damage, the field the error names): a wrong type and a missing field each
DAMAGES = {
    "delta": [
        (set_field(["table", "created"], "yes"), "payload.table.created"),
        (drop_field(["table", "app_id"]), "payload.table.app_id"),
    ],
    "iceberg": [
        (set_field(["table", "where", "identifier"], 7), "payload.table.where.identifier"),
        (drop_field(["facts", 0, "rows"]), "payload.facts[0].rows"),
    ],
    "hudi": [
        (set_field(["facts", 0, "size"], "12"), "payload.facts[0].size"),
        (drop_field(["table", "instant"]), "payload.table.instant"),
    ],
}
CASES = [(name, i) for name in FORMATS for i in range(2)]


def rows(start: int, n: int = 3) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"s{i}" for i in ids]})


def write(name: str, dest: Path, data: pa.Table, faults=()) -> None:
    options = TABLE_FORMATS[name].key_options("id")
    store = open_store(str(dest), faults=list(faults))
    dataferry.write_dataset(data, store, committer=name, mode="append", committer_options=options)


def ids_of(name: str, dest: Path) -> list[int]:
    committer = committer_by_name(name, open_store(str(dest)))
    return sorted(committer.read_rows().column("id").to_pylist())


def orphans(name: str, dest: Path) -> set[str]:
    committer = committer_by_name(name, open_store(str(dest)))
    on_disk = {
        str(p.relative_to(dest))
        for p in dest.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(dest).parts)
    }
    return on_disk - committer.referenced_files()


def decided(name: str, dest: Path, landed: bool) -> Path:
    """rows 0-2 committed, then rows 3-5 decided (intent written) and left unfinished: its
    transaction refused each time (not in the table), or made just before the driver died
    (in the table). Returns the intent record."""
    write(name, dest, rows(0))
    if landed:
        crash = FaultRule(action="crash", when="after", kinds=frozenset({Op.TABLE_COMMIT}))
        with pytest.raises(InjectedCrash):
            write(name, dest, rows(3), faults=[crash])
    else:
        failing = FaultRule(action="fail", kinds=frozenset({Op.TABLE_COMMIT}), times=-1)
        with pytest.raises(JobCommitError, match="decided"):
            write(name, dest, rows(3), faults=[failing])
    (record,) = dest.rglob(INTENT_FILE)
    return record


def rewrite_payload(record: Path, change) -> None:
    data = json.loads(record.read_bytes())
    change(data["payload"])
    record.write_bytes(json.dumps(data, separators=(",", ":")).encode())


def refused_naming(name: str, dest: Path, record: Path, field: str) -> None:
    store = open_store(str(dest))
    committer = committer_by_name(name, store)
    job_dir = str(record.parent.relative_to(dest))
    with pytest.raises(DamagedRecord) as e:
        load_intent(store, job_dir, plan_type_of(committer))
    assert e.value.field == field
    assert store.full_url(f"{job_dir}/{INTENT_FILE}") in str(e.value)


@pytest.mark.parametrize(("name", "case"), CASES)
def test_a_damaged_plan_not_in_the_table_is_refused_and_rolled_back(tmp_path, name, case):
    """A decided table commit whose transaction is not in the table, its plan damaged in one
    field. Read as a dict, the bad value would reach the table's log (a commit of wrong
    sizes, or a KeyError mid-commit leaving the table blocked); it must be refused naming
    the record and the field, and the job rolled back as the table says: nothing added."""
    dest = tmp_path / "t"
    record = decided(name, dest, landed=False)
    damage, field = DAMAGES[name][case]
    rewrite_payload(record, damage)
    refused_naming(name, dest, record, field)

    report = cleanup_destination(open_store(str(dest)), older_than_s=0)
    assert report.rolled_back and not report.rolled_forward and not report.failed, report
    assert ids_of(name, dest) == [0, 1, 2]
    assert orphans(name, dest) == set()
    write(name, dest, rows(6))
    assert ids_of(name, dest) == [0, 1, 2, 6, 7, 8]


@pytest.mark.parametrize(("name", "case"), CASES)
def test_a_damaged_plan_whose_transaction_landed_keeps_its_rows(tmp_path, name, case):
    """The driver died just after its transaction landed, and the plan was then damaged in
    one field. Broken, the job's committed files are deleted as uncommitted (rows lost), or
    the table stays blocked by a record no one can finish."""
    dest = tmp_path / "t"
    record = decided(name, dest, landed=True)
    damage, field = DAMAGES[name][case]
    rewrite_payload(record, damage)
    refused_naming(name, dest, record, field)

    report = cleanup_destination(open_store(str(dest)), older_than_s=0)
    assert report.rolled_forward and not report.rolled_back and not report.failed, report
    assert ids_of(name, dest) == list(range(6))
    assert orphans(name, dest) == set()


@pytest.mark.parametrize("name", FORMATS)
def test_a_record_of_the_previous_version_loads_and_finishes(tmp_path, name):
    """A table commit decided by the previous version (its plan a dict with today's field
    names, written by `json`; Hudi's early records without `action`) is finished by this one.
    Were a field renamed or made required without a default, an upgrade would leave every
    table commit that died before it unfinishable, the table blocked."""
    dest = tmp_path / "t"
    record = decided(name, dest, landed=False)
    payload = json.loads(record.read_bytes())["payload"]
    assert set(payload) == OLD_KEYS  # the field names stay those of earlier records
    assert OLD_TABLE_KEYS[name] <= set(payload["table"])

    def as_before(p):
        for key in set(p["table"]) - OLD_TABLE_KEYS[name]:
            del p["table"][key]  # keys a commit of this kind did not write then
        if name == "hudi":
            del p["table"]["action"]  # early records: a commit, not named

    rewrite_payload(record, as_before)

    report = cleanup_destination(open_store(str(dest)), older_than_s=0)
    assert report.rolled_forward and not report.failed, report
    assert ids_of(name, dest) == list(range(6))
    assert orphans(name, dest) == set()
    assert not record.exists()
