"""The tasks draft their files' DataFiles (`iceberg/drafts.py`): the job commit makes each from
its draft, reading no footer, and what it makes is what it would have built from the footer;
a draft on another basis, or none, leaves the file to its footer."""

from __future__ import annotations

import datetime as dt
import io

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq
import pytest
from pyiceberg.types import LongType

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.footers import read_footer
from dataferry.commit.table.iceberg import committer as iceberg_committer
from dataferry.commit.table.iceberg import files
from dataferry.commit.table.iceberg.drafts import DRAFT_KEY, Drafts, basis_of, draft
from dataferry.commit.table.iceberg.files import build_data_files
from dataferry.store import open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def rows(n: int = 40) -> pa.Table:
    ids = list(range(n))
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i % 5}" for i in ids]),
            "day": pa.array([dt.date(2024, 1, 1 + i % 3) for i in ids], pa.date32()),
            "ts": pa.array(
                [start + dt.timedelta(hours=7 * i) for i in ids], pa.timestamp("us", "UTC")
            ),
            "price": pa.array([i / 3 if i % 7 else None for i in ids], pa.float64()),
        }
    )


def fields(data_file) -> tuple:
    """What a DataFile says, comparable."""
    return (
        data_file.file_path,
        tuple(data_file.partition[i] for i in range(len(data_file.partition))),
        data_file.file_size_in_bytes,
        data_file.record_count,
        *(
            dict(getattr(data_file, k) or {})
            for k in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
        ),
        dict(data_file.lower_bounds or {}),
        dict(data_file.upper_bounds or {}),
        tuple(data_file.split_offsets or ()),
    )


@pytest.mark.parametrize(
    "partition_by, options",
    [
        (["day"], {}),
        (["name", "day"], {"properties": {"write.metadata.metrics.default": "counts"}}),
        ([], {"partition_spec": ("hour(ts)", "bucket[4](id)")}),
        ([], {"partition_spec": ("truncate[2](name)", "month(day)")}),
    ],
)
def test_a_jobs_data_files_are_its_tasks_drafts(
    tmp_path, monkeypatch, partition_by, options
) -> None:
    """Every DataFile of the job is made from its task's draft (no footer read at the job
    commit), and each says what the one built from the file's footer says."""
    url = str(tmp_path / "t")
    footer_reads: list[str] = []
    real = files.read_footer

    def read(store, path):
        footer_reads.append(path)
        return real(store, path)

    monkeypatch.setattr(files, "read_footer", read)
    done = dataferry.write_dataset(
        rows(),
        url,
        partition_by=partition_by,
        committer="iceberg",
        committer_options=options,
        tasks=2,
    )
    counters = done.run.commit.iostatistics.counters
    assert counters.get("iceberg_data_files_drafted") == done.files > 1
    assert footer_reads == []  # by the job commit (the tasks read theirs)
    monkeypatch.undo()
    fmt = committer_by_name("iceberg", open_store(url)).format
    tbl = fmt.table()
    committed = [t.file for t in tbl.scan().plan_files()]
    store = open_store(url)
    paths = [fmt.relative(f.file_path) for f in committed]
    footers = {p: read_footer(store, p) for p in paths}
    built = build_data_files(tbl.metadata, paths, footers, fmt.file_uri)
    assert sorted(map(fields, committed)) == sorted(map(fields, built))
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(40))


def test_a_draft_on_another_basis_is_left_for_the_footer(tmp_path) -> None:
    """A draft made on another schema (a column added since the tasks began) is not used: the
    file's DataFile is built from its footer; one on the table's own basis is."""
    url = str(tmp_path / "t")
    dataferry.write_dataset(rows(), url, partition_by=["day"], committer="iceberg")
    fmt = committer_by_name("iceberg", open_store(url)).format
    tbl = fmt.table()
    store = open_store(url)
    path = fmt.relative(next(iter(tbl.scan().plan_files())).file.file_path)
    size, meta = read_footer(store, path)
    basis = basis_of(tbl.metadata)
    mine = Drafts.of("job", {path: {DRAFT_KEY: draft(basis, path, size, meta)}})
    made = mine.data_files(tbl.metadata, [path], fmt.file_uri)
    built = build_data_files(tbl.metadata, [path], {path: (size, meta)}, fmt.file_uri)
    assert list(made) == [path] and fields(made[path]) == fields(built[0])
    with tbl.update_schema() as update:
        update.add_column("extra", LongType())
    wider = tbl.refresh().metadata
    assert basis_of(wider) != basis
    assert mine.data_files(wider, [path], fmt.file_uri) == {}
    assert Drafts.of("job", {path: {}}).data_files(tbl.metadata, [path], fmt.file_uri) == {}


def test_a_file_the_table_cannot_take_has_no_draft(tmp_path) -> None:
    """A file whose rows span two partitions gets no draft: the job commit reads its footer
    and refuses it as it always did."""
    url = str(tmp_path / "t")
    dataferry.write_dataset(rows(), url, partition_by=["day"], committer="iceberg")
    tbl = committer_by_name("iceberg", open_store(url)).table()
    basis = basis_of(tbl.metadata)
    sink = io.BytesIO()
    pq.write_table(rows(), sink)  # three days in one file
    spanning = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    assert draft(basis, "data/day=2024-01-01/x.parquet", 10, spanning) is None
    sink = io.BytesIO()
    pq.write_table(rows().filter(pa.compute.equal(rows()["day"], dt.date(2024, 1, 1))), sink)
    one = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    assert draft(basis, "data/day=2024-01-01/x.parquet", 10, one) is not None


def test_drafts_are_built_again_by_a_job_without_them(tmp_path, monkeypatch) -> None:
    """Tasks that send no drafts (a job begun before this version, a recovered one) commit as
    before: every DataFile from its footer."""
    monkeypatch.setattr(iceberg_committer.IcebergFormat, "file_report", lambda *a: None)
    url = str(tmp_path / "t")
    done = dataferry.write_dataset(rows(), url, partition_by=["day"], committer="iceberg")
    assert not done.run.commit.iostatistics.counters.get("iceberg_data_files_drafted")
    tbl = committer_by_name("iceberg", open_store(url)).table()
    assert len(list(tbl.scan().plan_files())) == done.files == 3
