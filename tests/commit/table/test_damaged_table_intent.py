"""A damaged intent record of a table job is settled from the table itself, for every table
format: its transaction is in the table (the job's uuid in a Delta commit, an Iceberg
snapshot's summary, a Hudi instant) or not, and the job is rolled back keeping what is
committed; the table is never left blocked."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.registry import FORMATS as TABLE_FORMATS
from dataferry.errors import InjectedCrash, JobCommitError
from dataferry.store import FaultRule, Op, open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

FORMATS = list(TABLE_FORMATS)


def rows(start: int, n: int = 3) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"s{i}" for i in ids]})


def write(name: str, dest, data: pa.Table, faults=(), mode: str = "append") -> None:
    options = TABLE_FORMATS[name].key_options("id")
    store = open_store(str(dest), faults=list(faults))
    dataferry.write_dataset(data, store, committer=name, mode=mode, committer_options=options)


def ids_of(name: str, dest) -> list[int]:
    committer = committer_by_name(name, open_store(str(dest)))
    return sorted(committer.read_rows().column("id").to_pylist())


def damage_intent(dest) -> None:
    (intent,) = dest.rglob("_commit_intent.json")
    intent.write_bytes(b'{"version": 1, "job_id": ')  # torn


def orphans(name: str, dest) -> set[str]:
    committer = committer_by_name(name, open_store(str(dest)))
    on_disk = {
        str(p.relative_to(dest))
        for p in dest.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(dest).parts)
    }
    return on_disk - committer.referenced_files()


@pytest.mark.parametrize("name", FORMATS)
def test_a_damaged_intent_of_a_commit_that_did_not_land_is_rolled_back(tmp_path, name):
    """Broken, cleanup stops at the damaged record (exit 1) and every later write into the
    table fails."""
    dest = tmp_path / "t"
    write(name, dest, rows(0))
    failing = FaultRule(action="fail", kinds=frozenset({Op.TABLE_COMMIT}), times=-1)
    with pytest.raises(JobCommitError, match="decided"):
        write(name, dest, rows(3), faults=[failing])
    damage_intent(dest)
    report = cleanup_destination(open_store(str(dest)), older_than_s=0)
    assert report.rolled_back and not report.rolled_forward and not report.failed, report
    assert ids_of(name, dest) == [0, 1, 2]
    assert orphans(name, dest) == set()
    write(name, dest, rows(6))
    assert ids_of(name, dest) == [0, 1, 2, 6, 7, 8]


@pytest.mark.parametrize("name", FORMATS)
def test_a_damaged_intent_of_a_commit_that_landed_keeps_its_rows(tmp_path, name):
    """The driver died just after its transaction landed. Broken, the table stays blocked, or
    the rollback by markers deletes files a committed version references."""
    dest = tmp_path / "t"
    write(name, dest, rows(0))
    crash = FaultRule(action="crash", when="after", kinds=frozenset({Op.TABLE_COMMIT}))
    with pytest.raises(InjectedCrash):
        write(name, dest, rows(3), faults=[crash])
    damage_intent(dest)
    report = cleanup_destination(open_store(str(dest)), older_than_s=0)
    assert report.rolled_forward and not report.rolled_back and not report.failed, report
    assert ids_of(name, dest) == [0, 1, 2, 3, 4, 5]
    assert orphans(name, dest) == set()
    write(name, dest, rows(6))
    assert ids_of(name, dest) == list(range(9))
