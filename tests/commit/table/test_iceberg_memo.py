"""What an Iceberg job commit does once, not once per question: its transaction's metadata
(`memo.py`: built once per change of the table or of the staged updates, and still every staged
update's), the table its plan read (an append's first landed check and try build on it), the
DataFiles its plan built."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest
from pyiceberg.types import LongType

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.iceberg import committer as iceberg_committer
from dataferry.commit.table.iceberg import drafts, files
from dataferry.commit.table.iceberg.committer import IcebergFormat
from dataferry.store import open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def count_data_files(monkeypatch) -> list[int]:
    """A list that gets the number of DataFiles each job commit makes (from drafts or
    footers), one entry per job commit."""
    made: list[int] = []
    real, real_plan = files.data_file, IcebergFormat.plan

    def data_file(*args, **kwargs):
        made[-1] += 1
        return real(*args, **kwargs)

    def plan(self, ctx, job, facts):
        made.append(0)
        return real_plan(self, ctx, job, facts)

    monkeypatch.setattr(files, "data_file", data_file)
    monkeypatch.setattr(drafts, "data_file", data_file)
    monkeypatch.setattr(IcebergFormat, "plan", plan)
    return made


def test_metadata_is_built_once_per_change(tmp_path) -> None:
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    for _ in range(2):
        dataferry.write_dataset(rows, url, partition_by=["day"], committer="iceberg", mode="append")
    fmt = committer_by_name("iceberg", open_store(url)).format
    assert isinstance(fmt, IcebergFormat)
    tbl = fmt.table()
    tx = fmt.evolved(tbl)
    first = tx.table_metadata
    assert first is tbl.metadata  # nothing staged: the table's own, not a deep copy
    tx.set_properties(marked="yes")  # a staged update: built with it, once
    staged = tx.table_metadata
    assert staged is not first and staged.properties["marked"] == "yes"
    assert tx.table_metadata is staged  # not rebuilt (and deep-copied) while nothing changed
    assert "marked" not in first.properties and "marked" not in tbl.metadata.properties
    tx._table.metadata = tbl.metadata.model_copy(update={"properties": {"other": "1"}})
    assert tx.table_metadata.properties == {"other": "1", "marked": "yes"}  # the table's, anew


def spy_loads(monkeypatch) -> list[str]:
    """Each table load of the committer: "plan", "commit" (the landed checks and tries) or
    "other" (the checks before the tasks)."""
    loads: list[str] = []
    phase: list[str] = []
    real_table, real_commit, real_plan = (
        IcebergFormat.table,
        IcebergFormat.commit,
        IcebergFormat.plan,
    )

    def table(self, where=None):
        loads.append(phase[-1] if phase else "other")
        return real_table(self, where)

    def in_phase(name, real):
        def run(self, *args):
            phase.append(name)
            try:
                return real(self, *args)
            finally:
                phase.pop()

        return run

    monkeypatch.setattr(IcebergFormat, "table", table)
    monkeypatch.setattr(IcebergFormat, "commit", in_phase("commit", real_commit))
    monkeypatch.setattr(IcebergFormat, "plan", in_phase("plan", real_plan))
    return loads


def test_an_append_builds_on_the_table_its_plan_read(tmp_path, monkeypatch) -> None:
    """The job's id is looked for in the table once before the first try, in the table the
    job's plan read just before the intent (no try made yet), and that try builds on it: the
    job commit reads the table once, not three times."""
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    write = dict(partition_by=["day"], committer="iceberg", mode="append")
    dataferry.write_dataset(rows, url, **write)
    loads = spy_loads(monkeypatch)
    dataferry.write_dataset(rows, url, **write)
    assert loads.count("plan") == 1 and loads.count("commit") == 0
    monkeypatch.undo()
    ids = committer_by_name("iceberg", open_store(url)).table().scan().to_arrow()["id"]
    assert sorted(ids.to_pylist()) == [1, 1, 2, 2]


def test_an_overwrite_reads_the_table_at_its_commit(tmp_path, monkeypatch) -> None:
    """An overwrite builds on the table read at its commit, as before (its conflict check)."""
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    dataferry.write_dataset(rows, url, partition_by=["day"], committer="iceberg")
    loads = spy_loads(monkeypatch)
    dataferry.write_dataset(rows, url, partition_by=["day"], committer="iceberg", mode="overwrite")
    assert loads.count("plan") == 1 and loads.count("commit") == 1
    monkeypatch.undo()
    ids = committer_by_name("iceberg", open_store(url)).table().scan().to_arrow()["id"]
    assert sorted(ids.to_pylist()) == [1, 2]


def test_a_job_tried_before_reads_afresh(tmp_path, monkeypatch) -> None:
    """A committer that has tried the job (a try whose answer may be lost, its connection
    holding the update) never takes a plan's read for the landed check: it reads afresh."""
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    dataferry.write_dataset(rows, url, partition_by=["day"], committer="iceberg", mode="append")
    fmt = committer_by_name("iceberg", open_store(url)).format
    assert isinstance(fmt, IcebergFormat)
    tbl = fmt.table()
    job = type("Job", (), {"job_uuid": "j1"})()
    intent = type("Intent", (), {"mode": "append"})()
    where = fmt.where()
    fmt._plan_read = ("j1", json.dumps(where, sort_keys=True, default=str), tbl)
    assert fmt.plan_read(job, intent, where) == [tbl]
    assert fmt.plan_read(job, intent, where) == []  # used once
    fmt._plan_read = ("j1", json.dumps(where, sort_keys=True, default=str), tbl)
    fmt._tried.add("j1")
    assert fmt.plan_read(job, intent, where) == []
    fmt._tried.clear()
    fmt._plan_read = ("j0", json.dumps(where, sort_keys=True, default=str), tbl)
    assert fmt.plan_read(job, intent, where) == []  # another job's plan


def test_the_plans_data_files_serve_the_first_try(tmp_path, monkeypatch) -> None:
    """The DataFiles built at the plan (checking every file against the table) are the first
    try's when the table's schema, spec and properties are the same: built once per job."""
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    write = dict(partition_by=["day"], committer="iceberg", mode="append")
    dataferry.write_dataset(rows, url, **write)
    builds = count_data_files(monkeypatch)
    dataferry.write_dataset(rows, url, **write)
    assert builds == [2]  # made once each (from the tasks' drafts), not again for the try
    monkeypatch.undo()
    tbl = committer_by_name("iceberg", open_store(url)).table()
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == [1, 1, 2, 2]


def test_the_plans_data_files_serve_a_table_the_job_creates(tmp_path, monkeypatch) -> None:
    """A job creating the table builds its DataFiles once too: the table its plan built in
    memory and the one the catalog's create transaction builds have the same schema, spec
    and metrics properties (the transaction adds the name mapping, another property)."""
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "day": ["a", "b", "c"]})
    builds = count_data_files(monkeypatch)
    options = {"properties": {"write.metadata.metrics.default": "counts"}}
    dataferry.write_dataset(
        rows, url, partition_by=["day"], committer="iceberg", committer_options=options
    )
    assert builds == [3]
    monkeypatch.undo()
    tbl = committer_by_name("iceberg", open_store(url)).table()
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    files = list(tbl.scan().plan_files())
    assert {f.file.partition[0] for f in files} == {"a", "b", "c"}
    assert {f.file.spec_id for f in files} == {tbl.metadata.default_spec_id} == {1}
    assert [m.partition_spec_id for m in tbl.current_snapshot().manifests(tbl.io)] == [1]
    assert all(not f.file.lower_bounds or set(f.file.lower_bounds) == {2} for f in files)


def test_data_files_are_built_anew_on_another_schema(tmp_path) -> None:
    """What the plan's DataFiles are kept for is their schema, spec, metrics properties and
    files, by value: any change of them builds again, another property does not."""
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    dataferry.write_dataset(rows, url, partition_by=["day"], committer="iceberg", mode="append")
    metadata = committer_by_name("iceberg", open_store(url)).table().metadata
    key = iceberg_committer.built_for(metadata, ["a.parquet"])
    assert key == iceberg_committer.built_for(metadata, ["a.parquet"])
    assert key != iceberg_committer.built_for(metadata, ["b.parquet"])
    tbl = committer_by_name("iceberg", open_store(url)).table()
    with tbl.update_schema() as update:
        update.add_column("extra", LongType())
    wider = tbl.refresh().metadata
    assert key != iceberg_committer.built_for(wider, ["a.parquet"])
    renamed = metadata.model_copy(update={"table_uuid": uuid.uuid4(), "current_schema_id": 0})
    assert key == iceberg_committer.built_for(renamed, ["a.parquet"])  # the same by value
    props = metadata.model_copy(update={"properties": {"write.metadata.metrics.default": "none"}})
    assert key != iceberg_committer.built_for(props, ["a.parquet"])
    other = metadata.model_copy(update={"properties": {**metadata.properties, "x": "1"}})
    assert key == iceberg_committer.built_for(other, ["a.parquet"])
