"""pyarrow's `existing_data_behavior` names mean what pyarrow means, whichever committer commits:
`delete_matching` replaces the partitions a write puts rows into and keeps the others.

pyarrow's own write of the same data into a second directory is the reference; both are read
back as users read them (pyarrow's dataset, polars and DuckDB globs).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dataferry
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, open_store

WEEK = pa.table({"day": ["mon", "tue", "wed"] * 4, "v": list(range(12))})
MONDAY = pa.table({"day": ["mon", "mon"], "v": [100, 101]})
NESTED = pa.table({"day": ["mon"] * 4, "hour": [1, 1, 2, 2], "v": list(range(4))})


def rows(path) -> list[tuple]:
    t = pads.dataset(str(path), partitioning="hive").to_table()
    return sorted(zip(*(t.column(c).to_pylist() for c in sorted(t.column_names)), strict=True))


def pyarrow_writes(path, *tables, partition_by) -> None:
    """The reference: pyarrow's write_dataset, the first table then the others with
    delete_matching (each with its own file names, as pyarrow needs for an append)."""
    for i, table in enumerate(tables):
        pads.write_dataset(
            table,
            str(path),
            format="parquet",
            partitioning=partition_by,
            partitioning_flavor="hive",
            basename_template=f"w{i}-{{i}}.parquet",
            existing_data_behavior="delete_matching" if i else "overwrite_or_ignore",
        )


@pytest.mark.parametrize("committer", ["manifest", "v1", "hive", "direct"])
def test_delete_matching_keeps_the_partitions_the_write_does_not_touch(tmp_path, committer):
    dest, ref = tmp_path / "dest", tmp_path / "ref"
    dataferry.write_dataset(WEEK, dest, partition_by=["day"], committer=committer)
    dataferry.write_dataset(
        MONDAY,
        dest,
        partition_by=["day"],
        committer=committer,
        existing_data_behavior="delete_matching",
    )
    pyarrow_writes(ref, WEEK, MONDAY, partition_by=["day"])
    assert rows(dest) == rows(ref)
    assert ("tue", 1) in rows(dest) and ("mon", 0) not in rows(dest)


def test_delete_matching_on_nested_partitions_replaces_only_the_leaves_written(tmp_path):
    dest, ref = tmp_path / "dest", tmp_path / "ref"
    first = pa.table({"day": ["mon"] * 4 + ["tue"], "hour": [1, 2, 3, 3, 1], "v": [9] * 5})
    dataferry.write_dataset(first, dest, partition_by=["day", "hour"])
    dataferry.write_dataset(
        NESTED, dest, partition_by=["day", "hour"], existing_data_behavior="delete_matching"
    )
    pyarrow_writes(ref, first, NESTED, partition_by=["day", "hour"])
    assert rows(dest) == rows(ref)
    assert ("mon", 3, 9) in rows(dest)  # mon/hour=3 was not written: kept


def test_delete_matching_is_what_polars_and_duckdb_globs_count(tmp_path):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    dest = tmp_path / "dest"
    dataferry.write_dataset(WEEK, dest, partition_by=["day"])
    dataferry.write_dataset(
        MONDAY, dest, partition_by=["day"], existing_data_behavior="delete_matching"
    )
    glob = f"{dest}/**/*.parquet"
    assert pl.scan_parquet(glob, hive_partitioning=True).select(pl.len()).collect().item() == 10
    counted = duckdb.sql(f"select count(*) from read_parquet('{glob}', hive_partitioning=true)")
    assert counted.fetchall() == [(10,)]


def test_a_delete_matching_job_that_dies_before_its_decision_leaves_every_old_partition(tmp_path):
    dest = tmp_path / "dest"
    dataferry.write_dataset(WEEK, dest, partition_by=["day"])
    before = rows(dest)
    # the driver dies just before its intent record: nothing is decided, nothing replaced
    crash = FaultRule(
        action="crash", when="before", kinds=frozenset({Op.WRITE}), path_glob=f"*/{INTENT_FILE}"
    )
    store = open_store(str(dest), faults=[crash])
    with pytest.raises(InjectedCrash):
        dataferry.write_dataset(
            MONDAY, store, partition_by=["day"], existing_data_behavior="delete_matching"
        )
    assert rows(dest) == before


@pytest.mark.parametrize("committer", ["auto", "manifest", "v1"])
def test_overwrite_or_ignore_replaces_a_file_of_the_same_name_as_pyarrow_does(tmp_path, committer):
    """A second write with the same basename_template: pyarrow overwrites the files of the same
    names and keeps the rest (manifest, which refuses a name already there in a plain append,
    is told to delete its targets)."""
    dest, ref = tmp_path / "dest", tmp_path / "ref"
    same = {
        "basename_template": "data-{i}.parquet",
        "existing_data_behavior": "overwrite_or_ignore",
    }
    for table in (WEEK, MONDAY):
        dataferry.write_dataset(table, dest, partition_by=["day"], committer=committer, **same)
        pads.write_dataset(
            table, ref, format="parquet", partitioning=["day"], partitioning_flavor="hive", **same
        )
    assert rows(dest) == rows(ref) and ("mon", 0) not in rows(dest)
