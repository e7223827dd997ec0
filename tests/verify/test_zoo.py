"""The referee on real data: the reference job of every table committer and of `direct`
writes the type zoo (`zoo_files.py`), and what a reader reads back is compared value for value
(`same_values`), not only counted. Committers that change values on purpose
(`broken_values.py`) must be reported."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dataferry.commit.direct.committer import list_committed
from dataferry.commit.factory import make_committer
from dataferry.commit.registry import KNOWN
from dataferry.store import open_store
from dataferry.verify import invariants as inv
from dataferry.verify import tables
from dataferry.verify.crash import verify_crash
from dataferry.verify.harness import deterministic_options, run_reference
from dataferry.verify.reference import FILES_PER_TASK, TASKS
from dataferry.verify.type_zoo import PARTITION, ZOO_COLUMNS
from dataferry.verify.zoo_files import differences, reference_rows, zoo_rows

from .broken_values import SPECS

ROWS_PER_JOB = TASKS * sum(1 + f for f in range(FILES_PER_TASK))
TABLES = ("delta", "iceberg", "hudi")


@pytest.fixture(autouse=True)
def broken_rows(monkeypatch):
    for name, spec in SPECS.items():
        monkeypatch.setitem(KNOWN, name, spec)


@pytest.mark.parametrize("committer", TABLES)
def test_table_scenarios_carry_every_zoo_column(committer, tmp_path):
    """Every zoo column is in the reference job's data files and in the rows the format's
    reader returns, with every value as written. Broken, the referee would judge tables
    holding integers and short strings only, and a user's nanosecond timestamps, zones,
    unsigned integers, categoricals, decimals and nested values could be lost unseen."""
    pytest.importorskip({"delta": "deltalake", "iceberg": "pyiceberg", "hudi": "hudi"}[committer])
    options = deterministic_options(committer)
    store = open_store(str(tmp_path / "t"), latency_scale=0.0)
    with tables.read_as(committer, options):
        out = run_reference(committer, store, "append", options)
        assert out.committed, out.error
        rows = make_committer(committer, store, **options).read_rows()
        assert set(ZOO_COLUMNS) <= set(rows.column_names)
        assert rows.num_rows == ROWS_PER_JOB
        data_files = [s.path for s in store.walk("") if s.path.endswith(".parquet")]
        assert len(data_files) == TASKS * FILES_PER_TASK
        for path in data_files:
            names = set(pq.read_schema(pa.BufferReader(store.read_bytes(path))).names)
            assert set(ZOO_COLUMNS) - {PARTITION} <= names, path
        assert inv.check_jobs(store, [out.job_uuid]) == []


def test_direct_writes_the_zoo_as_parquet(tmp_path):
    """direct's reference files are Parquet holding every zoo column (the partition column in
    the `part=` directory, as a Hive-style data set) and are checked by value."""
    options = deterministic_options("direct")
    store = open_store(str(tmp_path / "d"), latency_scale=0.0)
    out = run_reference("direct", store, "append", options)
    assert out.committed, out.error
    files = list_committed(store)
    assert len(files) == TASKS * FILES_PER_TASK
    for path in files:
        rows = pq.read_table(pa.BufferReader(store.read_bytes(path)))
        assert set(ZOO_COLUMNS) - {PARTITION} <= set(rows.column_names), path
    assert inv.check_jobs(store, [out.job_uuid]) == []
    path = files[-1]
    rows = pq.read_table(pa.BufferReader(store.read_bytes(path)))
    i = rows.schema.get_field_index("u16")
    store.write_bytes(path, _parquet(rows.set_column(i, "u16", pc.add(rows.column(i), 1))))
    problems = inv.check_jobs(store, [out.job_uuid])
    assert any(p.startswith(f"{inv.SAME_VALUES}: {path}") and "'u16'" in p for p in problems)


def _parquet(rows: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)
    return sink.getvalue().to_pybytes()


def _changed(name: str, column: pa.Array) -> pa.Table:
    rows = zoo_rows(1, 2)
    return rows.set_column(rows.schema.get_field_index(name), name, column)


def test_differences_sees_each_kind_of_change():
    """Units, zones, kinds of value, nulls, NaN and left-out columns all differ; a format's
    own conversions (uint -> wider int, dictionary -> values, ns -> us of whole microseconds,
    a zoned column in UTC) do not."""
    rows = zoo_rows(1, 2)
    assert differences(rows, 1, 2) == ""
    ts = rows.column("ts_ns")
    kept = {
        "u8": rows.column("u8").cast(pa.int32()),
        "cat": rows.column("cat").cast(pa.string()),
        "ts_ns": ts.cast(pa.timestamp("us")),
        "ts_tz": rows.column("ts_tz").cast(pa.timestamp("us", "UTC")),
        "ls": rows.column("ls").cast(pa.string()),
    }
    for name, column in kept.items():
        assert differences(_changed(name, column), 1, 2) == "", name
    wrong = {
        "ts_ns": ts.cast(pa.timestamp("ms"), safe=False),  # microseconds lost
        "u8": rows.column("u8").cast(pa.float64()),  # integers become floats
        "dec": rows.column("dec").cast(pa.float64()),
        "f64": pc.if_else(pc.is_nan(rows.column("f64")), None, rows.column("f64")),
        "s": pc.if_else(pc.equal(rows.column("s"), ""), None, rows.column("s")),
        "d": rows.column("d").cast(pa.timestamp("us")),
        "ts_tz": pc.assume_timezone(
            pc.local_timestamp(rows.column("ts_tz")).cast(pa.timestamp("us")), "UTC"
        ),
    }
    for name, column in wrong.items():
        assert f"column {name!r}" in differences(_changed(name, column), 1, 2), name
    assert "'mp' is missing" in differences(rows.drop_columns(["mp"]), 1, 2)
    assert "rows" in differences(rows.slice(1), 1, 2)


def test_deltalake_keeps_the_values_the_referee_expects(tmp_path):
    """The comparison is the format's own writer's: deltalake's `write_deltalake` of the same
    rows, read back, has no difference (if the referee's idea of "kept" drifted from what
    deltalake keeps, every Delta scenario would be reported, or none could be)."""
    deltalake = pytest.importorskip("deltalake")
    rows = reference_rows(1, 2, 0, "job", "p0")
    deltalake.write_deltalake(str(tmp_path / "d"), rows, partition_by=["part"])
    table = deltalake.DeltaTable(str(tmp_path / "d"))
    back = pa.concat_tables(pq.read_table(u) for u in table.file_uris()).sort_by("line")
    assert differences(back, 1, 2) == ""
    assert not math.isnan(back.column("f64")[0].as_py())


@pytest.mark.parametrize("committer", sorted(SPECS))
def test_a_committer_that_changes_values_is_reported(committer):
    """Each broken committer (a zone applied wrongly, a column dropped, ns counts read as us,
    microseconds truncated) commits without an error and every row count is right; the
    referee must still report `same_values`. Without the value check all four pass."""
    if committer != "broken-ms-direct":
        pytest.importorskip(
            {"delta": "deltalake", "iceberg": "pyiceberg", "hudi": "hudi"}[
                committer.rsplit("-", 1)[1]
            ]
        )
    report = verify_crash(committer, select=lambda t: False, ambiguous=False)
    counts = report.violations
    assert counts.get(inv.SAME_VALUES, 0) > 0, counts
    problems = [p for s in report.all_scenarios for p in s.problems]
    assert any(p.startswith(inv.SAME_VALUES) for p in problems)
