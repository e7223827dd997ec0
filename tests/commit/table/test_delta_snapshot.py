"""A Delta append reads the table as the process's kept deltalake table (its base) plus the
commits made since, read from the log (`commit/table/delta/snapshot.py`): what another writer
committed is never hidden by the kept table, and a job's txn in any version is found."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.delta import snapshot
from dataferry.commit.table.delta.commit_info import jobs_of
from dataferry.commit.table.delta.committer import DeltaFormat
from dataferry.commit.table.delta.entry import encode, entry_path, read_entry
from dataferry.store import open_store

from .test_delta_concurrent import data, ids_of, write

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


@pytest.fixture
def loads(monkeypatch) -> list[int | None]:
    """The versions deltalake loads the table at for a job (each `DeltaFormat.load`)."""
    seen: list[int | None] = []
    load = DeltaFormat.load

    def counted(self, version=None):
        seen.append(version)
        return load(self, version)

    monkeypatch.setattr(DeltaFormat, "load", counted)
    return seen


def format_of(url: str) -> DeltaFormat:
    fmt = committer_by_name("delta", open_store(url)).format
    assert fmt.exists()
    return fmt


def test_a_second_append_in_a_process_does_not_load_the_table_again(tmp_path, loads):
    """After one append the process keeps deltalake's table: the next appends read only the
    commits since (each a few hundred bytes) rather than the whole log again. Broken, each
    append loads the table whole (about 15 ms of CPU at 50 versions, growing with the log)."""
    url = str(tmp_path / "t")
    write(url, data(3))
    write(url, data(3, start=10))
    loads.clear()
    write(url, data(3, start=20))
    write(url, data(3, start=30))
    assert loads == []
    assert ids_of(url) == sorted([*range(3), *range(10, 13), *range(20, 23), *range(30, 33)])


def test_an_append_sees_the_schema_another_writer_merged(tmp_path, loads):
    """Another process (deltalake) adds a column with schema_mode="merge" after this process
    kept the table: the next append, with the new column, is checked against the new schema
    and lands. Broken (the kept table's schema trusted), it is refused: the table has no
    such column."""
    url = str(tmp_path / "t")
    write(url, data(3))
    write(url, data(3, start=10))
    wider = data(2, start=20).append_column("note", pa.array(["a", "b"]))
    write_deltalake(url, wider, mode="append", schema_mode="merge", partition_by=["day"])
    loads.clear()
    write(url, data(2, start=30).append_column("note", pa.array(["c", "d"])))
    assert len(loads) == 1  # the metaData since: deltalake read the table again
    rows = committer_by_name("delta", open_store(url)).read_rows()
    assert rows.column_names == ["id", "day", "note"] and rows.num_rows == 10


def no_deltalake_txn(monkeypatch) -> None:
    """deltalake's `transaction_version` made to fail: the kept table's txn ids answer."""

    def refuse(*_):
        raise AssertionError("deltalake's transaction_version asked")

    monkeypatch.setattr(DeltaTable, "transaction_version", refuse)


def test_a_txn_another_writer_committed_since_is_found(tmp_path, monkeypatch):
    """A job whose txn a group's leader carried into a version after the kept table learns it
    landed, at that version; a txn up to the kept table is found from its commit files (not
    asking deltalake, about 3 ms a job at 70 versions), and one in no version is not. Broken
    (the commits since not read, or those up to it), the job would commit its files a second
    time."""
    url = str(tmp_path / "t")
    write(url, data(3))
    write(url, data(3, start=10))
    no_deltalake_txn(monkeypatch)
    first, second = (
        jobs_of(next(a["commitInfo"] for a in read_entry(open_store(url), v) if "commitInfo" in a))
        for v in (0, 1)
    )
    base = format_of(url).view()  # the process keeps the table at version 0 (the 2nd job's)
    carried = [
        {"commitInfo": {"operation": "WRITE"}},
        {"txn": {"appId": "dataferry-j", "version": 1}},
    ]
    assert open_store(url).create_if_absent(entry_path(2), encode(carried))
    view = format_of(url).view()
    assert view.base is base.base and base.base.version() == 0  # the kept table, not a new load
    assert snapshot.landed_version(view, "dataferry-j") == 2
    assert snapshot.landed_version(view, f"dataferry-{first.pop()}") == 0
    assert snapshot.landed_version(view, f"dataferry-{second.pop()}") == 1
    assert snapshot.landed_version(view, "dataferry-nobody") is None


@pytest.mark.parametrize("versions", [1, 4])
def test_a_table_made_again_is_read_afresh(tmp_path, loads, versions):
    """The table is removed and made again by another writer with another schema, with fewer
    versions than the kept table or as many and more: the next append is checked against the
    new table. Broken (the kept table trusted while its own commit file is not the same one),
    the new table's shape would be hidden: the append of its schema refused."""
    url = str(tmp_path / "t")
    for k in range(3):
        write(url, data(2, start=10 * k))
    shutil.rmtree(tmp_path / "t")
    other = pa.table({"key": pa.array([1], pa.int64()), "day": ["d0"]})
    for _ in range(versions):
        write_deltalake(url, other, mode="append", partition_by=["day"])
    loads.clear()
    write(url, pa.table({"key": pa.array([2], pa.int64()), "day": ["d1"]}))
    assert len(loads) == 1
    assert sorted(DeltaTable(url).to_pyarrow_table()["key"].to_pylist()) == [1] * versions + [2]


def test_a_checkpoint_after_the_kept_table_loads_it_again(tmp_path, loads):
    """A checkpoint made since the kept table (whose older commit files may then expire): the
    table is loaded again from it rather than read on from commit files that may be gone."""
    url = str(tmp_path / "t")
    write(url, data(2))
    write(url, data(2, start=10))
    write_deltalake(url, data(2, start=20), mode="append", partition_by=["day"])
    DeltaTable(url).create_checkpoint()
    loads.clear()
    write(url, data(2, start=30))
    assert len(loads) == 1
    assert ids_of(url) == sorted([*range(2), *range(10, 12), *range(20, 22), *range(30, 32)])


def test_a_txn_in_a_checkpoint_is_found(tmp_path, monkeypatch):
    """The kept table's txn ids come from its newest checkpoint and the commit files after it:
    a job's txn and a caller's application transaction in the checkpoint are found. Broken
    (the checkpoint's txn column not read), a landed job would commit its files again."""
    url = str(tmp_path / "t")
    write(url, data(2), app_transactions=(("caller-app", 7, None),))
    DeltaTable(url).create_checkpoint()
    write(url, data(2, start=10))
    first = jobs_of(
        next(a["commitInfo"] for a in read_entry(open_store(url), 0) if "commitInfo" in a)
    )
    snapshot.forget()
    # the table loaded; its txn ids are read only when it serves a second job (a process that
    # writes once reads no commit file for them)
    assert format_of(url).view().at_base is None
    no_deltalake_txn(monkeypatch)
    view = format_of(url).view()
    assert view.at_base is not None and {"caller-app", f"dataferry-{first.pop()}"} <= view.at_base
    assert snapshot.landed_version(view, "caller-app") == 0


def test_a_process_keeps_a_few_tables(tmp_path, monkeypatch):
    """A process appending to many tables keeps deltalake's table of the last MAX_TABLES only
    (a loaded table holds its whole file list). Broken, a long-lived driver's memory grows with
    every table it ever wrote to."""
    monkeypatch.setattr(snapshot, "MAX_TABLES", 2)
    snapshot.forget()
    urls = [str(tmp_path / f"t{i}") for i in range(3)]
    for url in urls:
        write(url, data(1))
        format_of(url).view()
    assert len(snapshot._BASES) == 2
    assert [key[0] for key in snapshot._BASES] == [format_of(u).location[0] for u in urls[1:]]
