"""What an Iceberg job commit on an engine does not pay for: a marker directory per partition
(an attempt's markers are one batch file)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.store import open_store

from ..helpers import exclusive_creates

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def sales(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [f"d{i % 3}" for i in ids]})


def test_an_attempts_markers_are_one_batch_not_a_directory_per_partition(tmp_path, monkeypatch):
    """A write into three partitions marks its files with one batch file per attempt in the
    job's marker directory: no directory per partition is made there, and the job commit's
    cleanup deletes one file, not one per data file and a directory per partition."""
    url = str(tmp_path / "t")
    write = dict(partition_by=["day"], committer="iceberg", mode="append", tasks=1)
    dataferry.write_dataset(sales(30), url, **write)
    made = exclusive_creates(
        monkeypatch, lambda: dataferry.write_dataset(sales(30, start=30), url, **write)
    )
    marks = [p for p in made if p.startswith("_dataferry/iceberg-markers/")]
    assert len(marks) == 1 and marks[0].rsplit("/", 1)[-1].startswith("BATCH-"), marks
    tbl = committer_by_name("iceberg", open_store(url)).table()
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(60))
    assert not (tmp_path / "t" / "_dataferry").exists()
