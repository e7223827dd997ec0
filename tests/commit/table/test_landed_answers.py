"""A table commit that landed but was answered with an error (a conflict, a timeout, an I/O
error) is never made again without asking the table first (`table/transact.py`): the job's
transaction is in the table exactly once, for Delta and Iceberg. (Hudi's instant file is
created with create-if-absent under the name the plan fixed, and a second create finds the
first: no second instant can land.)

The failure is injected through the store layer (`Op.TABLE_COMMIT`, `when="after"`): the log
write is done, then the caller gets the error."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.store import FaultRule, Op, open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

ANSWERS = ["conflict", "timeout", "error"]


def data(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "x": pa.array(ids, pa.int64()),
            "day": [f"2024-01-0{1 + i % 3}" for i in ids],
            "v": [i * 0.5 for i in ids],
        }
    )


def answered_after(answer: str, conflict: type[BaseException]) -> FaultRule:
    """The table transaction lands, then the caller is told `answer`: the format's own
    conflict error, a timeout of unknown outcome, or a plain I/O error."""
    kinds = frozenset({Op.TABLE_COMMIT})
    if answer == "timeout":
        return FaultRule(action="ambiguous", when="after", kinds=kinds)
    if answer == "error":
        return FaultRule(action="fail", when="after", kinds=kinds)

    def lost_race(*_: object) -> None:
        raise conflict("injected: another writer committed this version first")

    return FaultRule(action="callback", when="after", kinds=kinds, callback=lost_race)


def append(dest, table: pa.Table, committer: str, rule: FaultRule | None = None, **kw):
    store = open_store(str(dest), faults=[rule]) if rule is not None else str(dest)
    return dataferry.write_dataset(
        table, store, partition_by=["day"], committer=committer, mode="append", **kw
    )


@pytest.mark.parametrize("answer", ANSWERS)
def test_delta_an_append_that_landed_is_not_committed_again(tmp_path, answer):
    """Were the table not asked after the error, a conflict answer would be tried again and
    the append committed twice (two versions for one job: every row duplicated). A timeout or
    an error answer is not tried again by the loop; the job's one resumed finish asks the table
    first too, and were neither to ask, those would commit twice as well."""
    deltalake = pytest.importorskip("deltalake")
    from dataferry.commit.table.delta.entry import VersionTaken

    dest = tmp_path / "t"
    append(dest, data(30), "delta")
    rule = answered_after(answer, VersionTaken)
    append(dest, data(20, start=100), "delta", rule)
    assert rule.fired == 1
    dt = deltalake.DeltaTable(str(dest))
    assert dt.version() == 1  # one version for the job
    xs = sorted(dt.to_pyarrow_table().column("x").to_pylist())
    assert xs == [*range(30), *range(100, 120)]


@pytest.mark.parametrize("answer", ANSWERS)
def test_iceberg_an_append_that_landed_is_not_committed_again(tmp_path, answer):
    """Were the table not asked after the error, a conflict answer would make a second
    snapshot of the job's files (every row twice); timeout and error answers as for Delta."""
    pytest.importorskip("pyiceberg")
    from pyiceberg.exceptions import CommitFailedException

    from dataferry.commit.lookup import committer_by_name

    dest = tmp_path / "t"
    append(dest, data(30), "iceberg")
    rule = answered_after(answer, CommitFailedException)
    append(dest, data(20, start=100), "iceberg", rule)
    assert rule.fired == 1
    tbl = committer_by_name("iceberg", open_store(str(dest))).table()
    assert len(tbl.snapshots()) == 2
    xs = sorted(tbl.scan().to_arrow().column("x").to_pylist())
    assert xs == [*range(30), *range(100, 120)]
