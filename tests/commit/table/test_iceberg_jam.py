"""No jam: an Iceberg destination never stays blocked by ordinary data or a commit that did not
land. Every check the table makes runs on the driver before any task (for a table the job
creates too); a transaction the table refuses after the job decided is undone, not finished;
a damaged intent record of a table job is settled from the table itself."""

from __future__ import annotations

import datetime as dt
import warnings

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import dataferry
from dataferry.cli.app import app
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.iceberg import files as iceberg_files
from dataferry.commit.table.iceberg.committer import IcebergFormat
from dataferry.errors import ConfigError, InjectedCrash, JobCommitError, TableCommitRefused
from dataferry.store import FaultRule, Op, open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

BASE = dt.datetime(2024, 3, 30, 23, 15, 7, 123456)
MARKERS = "_dataferry/iceberg-markers"


def stamped(kind: str, n: int = 6, start: int = 0) -> pa.Table:
    """`n` rows with a timestamp column of `kind` ("ns": naive nanoseconds, pandas 2's
    default; "tz": nanoseconds in Europe/Paris, a zoned pandas column)."""
    ids = list(range(start, start + n))
    times = [BASE + dt.timedelta(hours=i) for i in ids]
    if kind == "ns":
        ts = pa.array(times, pa.timestamp("ns"))
    else:
        utc = pa.array([t.replace(tzinfo=dt.UTC) for t in times], pa.timestamp("ns", "UTC"))
        ts = utc.cast(pa.timestamp("ns", "Europe/Paris"))
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": ts})


def table_of(dest):
    return committer_by_name("iceberg", open_store(str(dest))).table()


def instants(table: pa.Table) -> list[tuple[int, int]]:
    """(id, microseconds since the epoch) of each row: the values, whatever the unit or zone."""
    table = table.sort_by("id")
    micros = table.column("ts").cast(pa.timestamp("us", table.schema.field("ts").type.tz))
    return list(
        zip(table.column("id").to_pylist(), micros.cast(pa.int64()).to_pylist(), strict=True)
    )


def polars_table(tbl) -> pa.Table:
    import polars as pl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pl.scan_iceberg(tbl).collect().to_arrow()


def cleanup_cli(dest, *args: str):
    return CliRunner().invoke(app, ["cleanup", str(dest), *args])


def nothing_left(dest) -> None:
    """No marker directory and no data file no snapshot references."""
    assert not (dest / MARKERS).exists()
    tbl = table_of(dest)
    live = set()
    if tbl is not None and tbl.current_snapshot() is not None:
        live = {p.removeprefix("file://") for p in tbl.inspect.files()["file_path"].to_pylist()}
    on_disk = (
        {str(p) for p in (dest / "data").rglob("*.parquet")} if (dest / "data").exists() else set()
    )
    assert on_disk <= live, sorted(on_disk - live)


# --- (a) a new table is checked, and the data converted, before any task -------------------


@pytest.mark.parametrize("kind", ["ns", "tz"])
def test_a_new_table_from_pandas_timestamps_commits_and_the_destination_stays_open(tmp_path, kind):
    """Broken, a user's first write of a pandas frame (nanoseconds, or a zoned column)
    jams the destination for good: every later write and `dataferry cleanup` fail."""
    dest = tmp_path / "t"
    first = stamped(kind)
    dataferry.write_dataset(first, str(dest), committer="iceberg")
    tbl = table_of(dest)
    want = pa.timestamp("us", "UTC" if kind == "tz" else None)
    assert tbl.schema().as_arrow().field("ts").type == want
    assert instants(tbl.scan().to_arrow()) == instants(first)
    assert instants(polars_table(tbl)) == instants(first)

    later = stamped(kind, start=6)
    dataferry.write_dataset(later, str(dest), committer="iceberg", mode="append")
    both = pa.concat_tables([first, later])
    assert instants(table_of(dest).scan().to_arrow()) == instants(both)
    assert instants(polars_table(table_of(dest))) == instants(both)
    result = cleanup_cli(dest, "--older-than", "0s")
    assert result.exit_code == 0, result.output
    nothing_left(dest)


def test_a_type_iceberg_has_none_for_is_refused_on_the_driver_before_any_file(tmp_path):
    """Broken, the tasks write, the catalog refuses the schema at the job commit, and the
    files (or a decided commit) are left behind."""
    dest = tmp_path / "t"
    bad = pa.table({"id": [1, 2], "clock": pa.array([1, 2], pa.time64("ns"))})
    with pytest.raises(ConfigError, match="'clock'"):
        dataferry.write_dataset(bad, str(dest), committer="iceberg")
    assert not (dest / "data").exists() and not (dest / MARKERS).exists()
    dataferry.write_dataset(stamped("ns"), str(dest), committer="iceberg")
    assert table_of(dest).scan().to_arrow().num_rows == 6


def test_a_partition_column_iceberg_cannot_partition_by_is_refused_on_the_driver(tmp_path):
    """Broken, a spec the catalog refuses is found only at the job commit."""
    dest = tmp_path / "t"
    data = pa.table({"id": [1, 2], "tags": pa.array([[1], [2]], pa.list_(pa.int64()))})
    with pytest.raises(ConfigError, match="'tags'"):
        committer = dataferry.make_committer("iceberg", open_store(str(dest)))
        committer.prepare_input(data.schema, ["tags"])
    assert not (dest / "data").exists()


def test_a_new_table_is_checked_at_the_plan_when_no_schema_was_given(tmp_path):
    """A caller that never tells the schema (files written through the committer as they
    come) gets the creation checked at the plan, before the decision: broken, files holding
    nanoseconds are committed into a microsecond table, or the commit jams it."""
    import io

    import pyarrow.parquet as pq

    dest = tmp_path / "t"
    committer = dataferry.make_committer("iceberg", open_store(str(dest)))
    job = committer.new_job()
    committer.setup_job(job)
    task = job.task(0)
    committer.setup_task(task)
    sink = io.BytesIO()
    pq.write_table(stamped("ns"), sink)
    committer.write_file(task, "part-0.parquet", sink.getvalue())
    message = committer.commit_task(task)
    with pytest.raises(JobCommitError, match="column 'ts' holds timestamp") as caught:
        committer.commit_job(job, [message])
    assert "plan_table" in str(caught.value) and "decided" not in str(caught.value)
    committer.abort_job(job)
    nothing_left(dest)
    assert table_of(dest) is None


# --- (b) a transaction the table refuses after the decision is undone ---------------------


def test_a_transaction_the_catalog_refuses_is_undone_with_one_named_error(tmp_path, monkeypatch):
    """Broken (the refusal taken as a decided commit to finish), the destination jams:
    every later write fails 'cannot finish its decided commit yet' and cleanup exits 1."""
    from pyiceberg.io.pyarrow import UnsupportedPyArrowTypeException

    dest = tmp_path / "t"

    def refuse(self, where, schema, partition_by):
        raise UnsupportedPyArrowTypeException(schema.field("ts"), "Column 'ts' is refused")

    monkeypatch.setattr(IcebergFormat, "_create_transaction", refuse)
    with pytest.raises(TableCommitRefused, match="refuses the job's transaction"):
        dataferry.write_dataset(stamped("ns"), str(dest), committer="iceberg")
    monkeypatch.undo()
    nothing_left(dest)
    assert (
        not list((dest / "_dataferry").rglob("claim*")) if (dest / "_dataferry").exists() else True
    )
    dataferry.write_dataset(stamped("ns", start=6), str(dest), committer="iceberg")
    assert sorted(table_of(dest).scan().to_arrow()["id"].to_pylist()) == list(range(6, 12))
    result = cleanup_cli(dest)
    assert result.exit_code == 0, result.output


def test_a_catalog_that_cannot_be_reached_leaves_the_commit_decided_and_finished_later(
    tmp_path, monkeypatch
):
    """Only a refusal undoes a decided commit: a catalog that cannot be reached (a network
    error) may yet take it, so the commit stays decided and `dataferry cleanup` finishes it.
    Broken (every error taken as a refusal), the job's rows are thrown away."""
    dest = tmp_path / "t"

    def unreachable(self, *args, **kwargs):
        raise ConnectionError("catalog unreachable")

    monkeypatch.setattr(IcebergFormat, "_create_transaction", unreachable)
    with pytest.raises(JobCommitError, match="decided"):
        dataferry.write_dataset(stamped("ns"), str(dest), committer="iceberg")
    monkeypatch.undo()
    assert table_of(dest) is None
    result = cleanup_cli(dest, "--older-than", "0s")
    assert result.exit_code == 0, result.output
    assert "rolled forward" in result.output
    assert instants(table_of(dest).scan().to_arrow()) == instants(stamped("ns"))
    nothing_left(dest)


def test_a_decided_commit_today_s_code_left_is_undone_by_the_next_write(tmp_path, monkeypatch):
    """The state earlier versions left: files holding nanoseconds and a decided intent whose
    transaction the table can never take. Broken, the next write and every cleanup fail
    for good ('cannot finish its decided commit yet')."""
    dest = tmp_path / "t"
    # as before the type policy: files keep nanoseconds, and nothing checks them
    monkeypatch.setattr(IcebergFormat, "file_columns", lambda self, task, rel, schema: None)
    monkeypatch.setattr(iceberg_files, "check_file_types", lambda path, meta, table: None)
    monkeypatch.setattr(IcebergFormat, "check_input", lambda self, schema, part: None)
    failing = FaultRule(action="fail", kinds=frozenset({Op.TABLE_COMMIT}), times=-1)
    with pytest.raises(JobCommitError, match="decided"):
        dataferry.write_dataset(
            stamped("ns"), open_store(str(dest), faults=[failing]), committer="iceberg"
        )
    monkeypatch.undo()
    assert list((dest / MARKERS).rglob("_commit_intent.json"))  # decided, files in place

    dataferry.write_dataset(stamped("ns", start=6), str(dest), committer="iceberg")
    tbl = table_of(dest)
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(6, 12))
    assert tbl.schema().as_arrow().field("ts").type == pa.timestamp("us")
    nothing_left(dest)
    assert cleanup_cli(dest, "--older-than", "0s").exit_code == 0


def test_cleanup_undoes_a_decided_commit_the_table_refuses(tmp_path, monkeypatch):
    """The same state, met by `dataferry cleanup` first: broken, it exits 1 and the claim
    stays."""
    dest = tmp_path / "t"
    monkeypatch.setattr(IcebergFormat, "file_columns", lambda self, task, rel, schema: None)
    monkeypatch.setattr(iceberg_files, "check_file_types", lambda path, meta, table: None)
    monkeypatch.setattr(IcebergFormat, "check_input", lambda self, schema, part: None)
    failing = FaultRule(action="fail", kinds=frozenset({Op.TABLE_COMMIT}), times=-1)
    with pytest.raises(JobCommitError):
        dataferry.write_dataset(
            stamped("tz"), open_store(str(dest), faults=[failing]), committer="iceberg"
        )
    monkeypatch.undo()
    result = cleanup_cli(dest)
    assert result.exit_code == 0, result.output
    assert "rolled back" in result.output
    nothing_left(dest)
    assert table_of(dest) is None


# --- (c) a damaged intent record is settled from the table ---------------------------------


def damage_intent(dest) -> None:
    (intent,) = (dest / MARKERS).rglob("_commit_intent.json")
    intent.write_bytes(b'{"version": 1, "job_id": ')  # torn


def test_a_damaged_intent_whose_transaction_is_not_in_the_table_is_rolled_back(tmp_path):
    """Broken, cleanup stops at the damaged record and leaves the destination claimed: no
    write into the table succeeds again."""
    dest = tmp_path / "t"
    dataferry.write_dataset(stamped("ns"), str(dest), committer="iceberg")
    failing = FaultRule(action="fail", kinds=frozenset({Op.TABLE_COMMIT}), times=-1)
    with pytest.raises(JobCommitError, match="decided"):
        dataferry.write_dataset(
            stamped("ns", start=6),
            open_store(str(dest), faults=[failing]),
            committer="iceberg",
            mode="append",
        )
    damage_intent(dest)
    result = cleanup_cli(dest, "--older-than", "0s")
    assert result.exit_code == 0, result.output
    assert "rolled back" in result.output
    nothing_left(dest)
    assert sorted(table_of(dest).scan().to_arrow()["id"].to_pylist()) == list(range(6))
    dataferry.write_dataset(stamped("ns", start=12), str(dest), committer="iceberg", mode="append")
    assert table_of(dest).scan().to_arrow().num_rows == 12


def test_a_damaged_intent_whose_transaction_landed_keeps_the_committed_files(tmp_path):
    """The driver died just after its snapshot landed, and its intent record is damaged.
    Broken, the table is blocked; or, rolled back by its markers, the job's committed
    files are deleted and the table can no longer be read."""
    dest = tmp_path / "t"
    dataferry.write_dataset(stamped("ns"), str(dest), committer="iceberg")
    crash = FaultRule(action="crash", when="after", kinds=frozenset({Op.TABLE_COMMIT}))
    with pytest.raises(InjectedCrash):
        dataferry.write_dataset(
            stamped("ns", start=6),
            open_store(str(dest), faults=[crash]),
            committer="iceberg",
            mode="append",
        )
    damage_intent(dest)
    store = open_store(str(dest))
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_forward and not report.failed, report
    nothing_left(dest)
    tbl = table_of(dest)
    assert sorted(tbl.scan().to_arrow()["id"].to_pylist()) == list(range(12))
    assert polars_table(tbl).num_rows == 12
    dataferry.write_dataset(stamped("ns", start=12), str(dest), committer="iceberg", mode="append")
    assert table_of(dest).scan().to_arrow().num_rows == 18
