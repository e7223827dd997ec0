"""Iceberg's schema evolution as pyiceberg's users know it: `schema_mode="merge"` evolves the
table by name (`union_by_name`: new columns, promoted types) in the job's one commit, and
Iceberg's type promotions (an int column's data into a long column) are taken as pyiceberg
takes them, the files holding the table's types."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.errors import ConfigError
from dataferry.store import open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")
MERGE = {"schema_mode": "merge"}


def table_of(dest):
    return committer_by_name("iceberg", open_store(str(dest))).table()


def polars_rows(tbl) -> list[dict]:
    import polars as pl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pl.scan_iceberg(tbl).collect().sort("id").to_dicts()


def base(n: int = 4, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [f"d{i % 2}" for i in ids]})


def pyiceberg_made(tmp_path, first: pa.Table, then: pa.Table):
    """The same two writes by pyiceberg itself: create, then union_by_name and append."""
    from pyiceberg.catalog.sql import SqlCatalog

    where = tmp_path / "ref"
    where.mkdir()
    catalog = SqlCatalog("ref", uri=f"sqlite:///{where}/c.db", warehouse=f"file://{where}")
    catalog.create_namespace("n")
    tbl = catalog.create_table("n.t", schema=first.schema)
    tbl.append(first)
    with tbl.transaction() as tx:
        with tx.update_schema() as update:
            update.union_by_name(then.schema)
        tx.append(then)
    return catalog.load_table("n.t")


def test_a_new_column_is_added_by_name_in_the_job_s_one_commit(tmp_path):
    """Broken, a new column is refused (or a second commit adds it, visible alone)."""
    dest = tmp_path / "t"
    dataferry.write_dataset(base(), str(dest), partition_by=["day"], committer="iceberg")
    more = base(4, start=4).append_column("score", pa.array([1.5, 2.5, None, 4.5]))
    result = dataferry.write_dataset(
        more,
        str(dest),
        partition_by=["day"],
        committer="iceberg",
        mode="append",
        committer_options=MERGE,
    )
    tbl = table_of(dest)
    assert [f.name for f in tbl.schema().fields] == ["id", "day", "score"]
    assert len(tbl.snapshots()) == 2  # the schema change rode in the job's own commit
    assert len(tbl.metadata.metadata_log) == 1  # one metadata file per commit: 2 in all
    assert tbl.current_snapshot().summary["dataferry.job-uuid"] == result.run.job.job_uuid
    theirs = pyiceberg_made(tmp_path, base(), more)
    want = theirs.scan().to_arrow().sort_by("id").to_pylist()
    assert tbl.scan().to_arrow().sort_by("id").to_pylist() == want
    assert polars_rows(tbl) == want
    # pyiceberg appends after it, by the name mapping the evolution kept
    tbl.append(base(2, start=8).append_column("score", pa.array([9.0, None])))
    assert table_of(dest).scan().to_arrow().num_rows == 10


def test_a_new_column_without_merge_is_refused_saying_how_to_add_it(tmp_path):
    """Broken, the user is told no remedy (or the column is silently dropped)."""
    dest = tmp_path / "t"
    dataferry.write_dataset(base(), str(dest), committer="iceberg")
    more = base(4, start=4).append_column("score", pa.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(ConfigError, match=r"'score'.*schema_mode': 'merge'"):
        dataferry.write_dataset(more, str(dest), committer="iceberg", mode="append")
    assert not (dest / "_dataferry" / "iceberg-markers").exists()


def test_int_data_goes_into_a_long_column_as_pyiceberg_takes_it(tmp_path):
    """int32 into a long column (pandas' int32, a polars Int32): pyiceberg accepts it.
    Broken, it is refused, or the files hold int32 under a long column."""
    dest = tmp_path / "t"
    dataferry.write_dataset(base(), str(dest), committer="iceberg")
    narrow = base(4, start=4).set_column(0, "id", pa.array(range(4, 8), pa.int32()))
    dataferry.write_dataset(narrow, str(dest), committer="iceberg", mode="append")
    tbl = table_of(dest)
    assert str(tbl.schema().find_field("id").field_type) == "long"
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(8))
    assert [r["id"] for r in polars_rows(tbl)] == list(range(8))
    for path in (dest / "data").rglob("*.parquet"):
        assert pq.read_schema(path).field("id").type == pa.int64(), path.name


def test_merge_promotes_the_table_s_column_to_the_data_s_wider_type(tmp_path):
    """An int column gets long data with schema_mode='merge': the table's column becomes a
    long, as union_by_name makes it. Broken, refused, or the long values are cut."""
    dest = tmp_path / "t"
    narrow = pa.table({"id": pa.array([1, 2], pa.int32())})
    dataferry.write_dataset(narrow, str(dest), committer="iceberg")
    wide = pa.table({"id": pa.array([2**40], pa.int64())})
    with pytest.raises(ConfigError, match="'id'"):
        dataferry.write_dataset(wide, str(dest), committer="iceberg", mode="append")
    dataferry.write_dataset(
        wide, str(dest), committer="iceberg", mode="append", committer_options=MERGE
    )
    tbl = table_of(dest)
    assert str(tbl.schema().find_field("id").field_type) == "long"
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == [1, 2, 2**40]
    assert [r["id"] for r in polars_rows(tbl)] == [1, 2, 2**40]


def test_merge_refuses_a_type_iceberg_cannot_evolve_to_before_any_file(tmp_path):
    """A string into a long column cannot be evolved. Broken, the tasks write and the job
    commit fails (or jams the table)."""
    dest = tmp_path / "t"
    dataferry.write_dataset(base(), str(dest), committer="iceberg")
    bad = base(2).set_column(0, "id", pa.array(["a", "b"]))
    with pytest.raises(ConfigError, match="merge"):
        dataferry.write_dataset(
            bad, str(dest), committer="iceberg", mode="append", committer_options=MERGE
        )
    assert len(list((dest / "data").rglob("*.parquet"))) == 1
    assert not (dest / "_dataferry" / "iceberg-markers").exists()
