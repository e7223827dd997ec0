"""The Delta committer, as deltalake and polars read its tables: creation, each write mode,
statistics in the log, an unknown commit outcome resolved both ways, failed and killed jobs
leaving no orphan file, interop with tables deltalake wrote, and appenders at once."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.errors import ConfigError, DestinationError, InjectedCrash
from dataferry.store import FaultRule, Op, open_store

from ..helpers import exclusive_creates

deltalake = pytest.importorskip("deltalake")
pl = pytest.importorskip("polars")


def sales(n: int = 300, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "day": [f"2024-01-0{i % 3 + 1}" for i in range(start, start + n)],
            "x": pa.array(range(start, start + n), pa.int64()),
            "s": [f"v{i}" for i in range(start, start + n)],
        }
    )


def rows(path: Path) -> pa.Table:
    return deltalake.DeltaTable(str(path)).to_pyarrow_table().sort_by("x")


def orphans(path: Path) -> list[str]:
    """Parquet files in the table's storage that its current version does not reference."""
    dt = deltalake.DeltaTable(str(path))
    live = set(pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist())
    return sorted(
        str(p.relative_to(path))
        for p in path.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
        and str(p.relative_to(path)) not in live
    )


def write(path: Path, data: pa.Table, mode: str = "append", **kw):
    return dataferry.write_dataset(
        data, str(path), partition_by=["day"], committer="delta", mode=mode, **kw
    )


def test_a_job_creates_the_table_and_appends_as_deltalake_and_polars_read_it(tmp_path):
    t = tmp_path / "t"
    write(t, sales(), mode="error")
    dt = deltalake.DeltaTable(str(t))
    assert dt.version() == 0 and dt.metadata().partition_columns == ["day"]
    write(t, sales(start=300))
    assert rows(t).column("x").to_pylist() == list(range(600))
    assert pl.read_delta(str(t)).height == 600
    # every file of the job is in the log, partition columns only in the log
    assert orphans(t) == []
    assert not (t / "_dataferry").exists() and not (t / "_SUCCESS").exists()


def test_the_log_carries_statistics_and_the_jobs_transaction(tmp_path):
    t = tmp_path / "t"
    result = write(t, sales(), mode="error")
    log = [json.loads(line) for line in (t / "_delta_log" / f"{0:020d}.json").open()]
    adds = [a["add"] for a in log if "add" in a]
    assert len(adds) == result.files
    stats = json.loads(adds[0]["stats"])
    assert stats["numRecords"] > 0 and set(stats["minValues"]) == {"x", "s"}
    assert adds[0]["partitionValues"]["day"].startswith("2024-01-0")
    txn = [a["txn"] for a in log if "txn" in a]
    assert len(txn) == 1 and txn[0]["appId"].startswith("dataferry-")
    # statistics prune: a filter reads only the files whose bounds hold the value
    dt = deltalake.DeltaTable(str(t))
    assert dt.to_pyarrow_table(filters=[("x", "=", 7)]).num_rows == 1


def test_overwrite_replaces_in_one_version_and_keeps_the_old_one_readable(tmp_path):
    t = tmp_path / "t"
    write(t, sales(), mode="error")
    write(t, sales(30, start=1000), mode="overwrite")
    assert rows(t).column("x").to_pylist() == list(range(1000, 1030))
    old = deltalake.DeltaTable(str(t), version=0).to_pyarrow_table()
    assert old.num_rows == 300  # the earlier version's files are still there


def test_a_partition_overwrite_replaces_only_the_partitions_written(tmp_path):
    t = tmp_path / "t"
    write(t, sales(), mode="error")
    new = sales(10, start=1000).filter(pc.equal(pc.field("day"), "2024-01-01"))
    write(t, new, mode="overwrite-partitions")
    got = rows(t)
    days = got.column("day").to_pylist()
    assert sorted(set(days)) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert [
        x for x, d in zip(got["x"].to_pylist(), days, strict=True) if d == "2024-01-01"
    ] == sorted(new.column("x").to_pylist())
    assert days.count("2024-01-02") == 100


def test_bad_input_is_refused_before_any_file_is_written(tmp_path):
    t = tmp_path / "t"
    write(t, sales(), mode="error")
    before = sorted(p for p in t.rglob("*") if p.is_file())
    with pytest.raises(DestinationError, match=r"not empty|already exists"):
        write(t, sales(), mode="error")
    with pytest.raises(ConfigError, match="partitioned by \\['day'\\]"):
        dataferry.write_dataset(sales(), str(t), committer="delta", mode="append")
    other = sales().set_column(1, "x", pa.array([str(i) for i in range(300)]))
    with pytest.raises(ConfigError, match="column 'x' is string in the data but int64"):
        write(t, other)
    with pytest.raises(ConfigError, match="column 'extra' is not in Delta table"):
        write(t, sales().append_column("extra", pa.array([1] * 300)))
    assert sorted(p for p in t.rglob("*") if p.is_file()) == before


def test_a_table_deltalake_wrote_is_appended_to(tmp_path):
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), sales(), partition_by=["day"])
    write(t, sales(start=300))
    assert rows(t).column("x").to_pylist() == list(range(600))
    assert pl.read_delta(str(t)).height == 600


def _append_many(path: str, worker: int, commits: int) -> None:
    for c in range(commits):
        start = 10_000 * worker + 100 * c
        dataferry.write_dataset(
            sales(5, start=start), path, partition_by=["day"], committer="delta", mode="append"
        )


def test_appenders_at_once_all_land(tmp_path):
    t = tmp_path / "t"
    write(t, sales(3), mode="error")
    ctx = multiprocessing.get_context("spawn")  # deltalake panics in a forked child
    procs = [ctx.Process(target=_append_many, args=(str(t), w, 3)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    dt = deltalake.DeltaTable(str(t))
    assert dt.version() == 9
    assert dt.to_pyarrow_table().num_rows == 3 + 3 * 3 * 5
    assert orphans(t) == []


def test_a_table_on_the_s3_server(s3_url):
    dataferry.write_dataset(sales(), s3_url, partition_by=["day"], committer="delta", mode="error")
    dataferry.write_dataset(
        sales(start=300), s3_url, partition_by=["day"], committer="delta", mode="append"
    )
    store = open_store(s3_url)
    from dataferry.commit.table.location import table_location

    loc = table_location(store)
    dt = deltalake.DeltaTable(loc.uri, storage_options=loc.storage_options)
    assert sorted(dt.to_pyarrow_table().column("x").to_pylist()) == list(range(600))


def test_a_zombies_markers_after_the_commit_roll_back_only_the_zombies_file(tmp_path):
    """An attempt the driver gave up on marks and writes a file after its job committed:
    cleanup rolls the job's new marker directory back, deleting the zombie's file and keeping
    every file the table references (they carry the same job tag)."""
    t = tmp_path / "t"
    result = write(t, sales(), mode="error")
    job = result.run.job
    committer = dataferry.make_committer("delta", str(t))
    name = f"part-zombie-{job.job_uuid[:8]}-t0-a7.parquet"
    committer.markers(job).create("day=2024-01-01", name)
    (t / "day=2024-01-01" / name).write_bytes(b"PAR1 late")
    cleanup_destination(open_store(str(t)), older_than_s=0)
    assert not (t / "day=2024-01-01" / name).exists()
    assert rows(t).num_rows == 300 and orphans(t) == []


def test_a_decided_commit_whose_files_are_gone_is_undone_not_committed(tmp_path):
    """A job stopped just before writing its intent was rolled back by the job that took the
    destination over (its files deleted); it then wrote its intent. Recovery must not commit
    paths that name nothing (deltalake takes them): it undoes the job."""
    t = tmp_path / "t"
    write(t, sales(), mode="error")
    rule = FaultRule(action="crash", when="before", kinds=frozenset({Op.TABLE_COMMIT}))
    with pytest.raises(InjectedCrash):
        dataferry.write_dataset(
            sales(start=300),
            open_store(str(t), faults=[rule]),
            partition_by=["day"],
            committer="delta",
            mode="append",
        )
    for f in orphans(t):  # what the taker's rollback deleted
        (t / f).unlink()
    report = cleanup_destination(open_store(str(t)))
    assert report.rolled_back and not report.rolled_forward, report
    assert deltalake.DeltaTable(str(t)).version() == 0 and rows(t).num_rows == 300
    assert not (t / "_dataferry").exists()


def test_a_transaction_deltalake_refuses_is_undone_not_left_for_ever(tmp_path, monkeypatch):
    """A transaction deltalake refuses for good (its schema check, its protocol) changed
    nothing a reader sees: the job is undone (its files deleted, the destination released)
    with one named error. Left decided instead, every later write into the table failed
    "cannot finish its decided commit yet" and cleanup could not finish it either."""
    from deltalake.exceptions import SchemaMismatchError

    from dataferry.commit.table.delta.committer import DeltaFormat
    from dataferry.errors import TableCommitRefused

    t = tmp_path / "t"
    write(t, sales(30), mode="error")
    before = set(data_paths(t))
    real = DeltaFormat._commit

    def refuse(self, *args, **kwargs):
        raise SchemaMismatchError("the table refuses this schema")

    monkeypatch.setattr(DeltaFormat, "_commit", refuse)
    with pytest.raises(TableCommitRefused, match="refuses this schema"):
        write(t, sales(30, start=30))
    monkeypatch.setattr(DeltaFormat, "_commit", real)

    assert set(data_paths(t)) == before  # the refused job's files are gone
    assert deltalake.DeltaTable(str(t)).version() == 0
    assert not cleanup_destination(open_store(str(t))).failed
    write(t, sales(30, start=30))  # the next write goes through
    assert rows(t).column("x").to_pylist() == list(range(60))


def data_paths(path: Path) -> list[str]:
    return sorted(
        str(p.relative_to(path))
        for p in path.rglob("*.parquet")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
    )


def test_an_appends_markers_are_one_batch_not_a_directory_per_partition(tmp_path, monkeypatch):
    """A small append into three partitions marks its files with one batch file in the job's
    marker directory (`markers.direct`): no directory per partition is made there and
    removed again, which on a local disk costs more than the rest of the job's records."""
    t = tmp_path / "t"
    write(t, sales(30))
    made = exclusive_creates(monkeypatch, lambda: write(t, sales(30, start=30)))
    marks = [p for p in made if p.startswith("_dataferry/delta-markers/")]
    assert len(marks) == 1 and marks[0].rsplit("/", 1)[-1].startswith("BATCH-")
    assert rows(t).column("x").to_pylist() == list(range(60))
    assert not (t / "_dataferry").exists() and orphans(t) == []
