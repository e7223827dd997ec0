"""A task that splits its own rows (on Dask and Ray) names each new partition's first file
ahead, once, for each round: a committer that keeps an attempt's markers in batch files
(Delta's, Iceberg's) then makes one batch per round, not a marker and a directory each."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.direct.committer import DirectCommitter
from dataferry.dataset.options import WriteOptions
from dataferry.dataset.task import write_rows
from dataferry.engine.attempt import commit_attempt, run_attempt
from dataferry.store import open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def rows(days: list[int], start: int = 0) -> pa.Table:
    ids = list(range(start, start + len(days)))
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [f"d{d}" for d in days]})


def test_a_task_splitting_its_rows_marks_them_in_one_batch_per_round(tmp_path, monkeypatch):
    """Rows of three partitions, then one more partition and an old one, through one task
    attempt's writer (`write_rows`, as an engine's task): two announcements, of the new
    partitions' first files; the marker directory holds batch files only, and the job
    commits every row."""
    announced: list[list[str]] = []
    real = DirectCommitter.announce_files

    def spy(self, task, relpaths):
        announced.append(list(relpaths))
        return real(self, task, relpaths)

    monkeypatch.setattr(DirectCommitter, "announce_files", spy)
    url = str(tmp_path / "t")
    marker_files: list[str] = []
    with dataferry.open_job(url, committer="iceberg") as job:
        ctx = job.task(0).ctx
        options = WriteOptions(keep_partition_columns=True)
        batches = [rows([1, 2, 3] * 30), rows([4, 1] * 30, start=90)]

        def work(out):
            return write_rows(out, batches[0].schema, ("day",), options, batches)

        from dataferry.dataset import task as task_module

        monkeypatch.setattr(task_module, "INBOX_BYTES", 1)  # a round per batch
        monkeypatch.setattr(task_module, "ROUND_BYTES", 1)
        report = run_attempt(ctx, work)
        store = open_store(url)
        marker_files = [s.path for s in store.walk("_dataferry")]
        message = commit_attempt(ctx, written=report.written).message
        job.commit([message])
    dirs = [[p.split("/")[0] for p in batch] for batch in announced]
    assert dirs == [["day=d1", "day=d2", "day=d3"], ["day=d4"]]
    markers = [p for p in marker_files if "iceberg-markers" in p]
    assert markers and all(p.rsplit("/", 1)[-1].startswith("BATCH-") for p in markers), markers
    tbl = dataferry.make_committer("iceberg", url).table()
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(150))
