"""Concurrent inserts into a Hudi table, read by Spark 3.5 + Hudi 0.15: an instant completed
after a later one (as under Hudi's optimistic concurrency: instant times taken at the start of
a write, completed in any order) is read with every row. Broken (a later completion hidden, or
two jobs sharing an instant), Spark misses a job's rows or reads them twice."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.store import FaultRule, Op, open_store

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.filterwarnings("ignore::Warning"),
]

# inserts without the claim: a table without Hudi's metadata table (one keeping it serializes
# its writers under the claim, as Hudi's own writers take their lock)
OPTIONS = {
    "table_name": "concurrent",
    "record_key": "id",
    "operation": "insert",
    "metadata_table": False,
}


def rows(start: int, n: int = 4) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "part": [f"p{i % 2}" for i in ids]})


def insert(dest, table: pa.Table):
    return dataferry.write_dataset(
        table, dest, committer="hudi", mode="append", partition_by=["part"],
        committer_options=OPTIONS, progress=False,
    )  # fmt: skip


def test_spark_reads_an_instant_completed_after_a_later_one(spark, tmp_path):
    dest = str(tmp_path / "concurrent")
    insert(dest, rows(0))
    b_done: list[str] = []

    def b_commits_first(*_: object) -> None:  # A holds its instant, not yet completed
        b_done.append(insert(dest, rows(100)).run.job.config.instant)

    hold = FaultRule(
        action="callback",
        kinds=frozenset({Op.CREATE_IF_ABSENT}),
        path_glob=".hoodie/*.commit",
        callback=b_commits_first,
    )
    a = insert(open_store(dest, faults=[hold]), rows(200)).run.job.config.instant
    assert hold.fired == 1 and a < b_done[0]  # A's instant is the earlier, completed last
    got = spark.read("hudi", dest)
    assert sorted(got["id"].to_pylist()) == [*range(4), *range(100, 104), *range(200, 204)]
