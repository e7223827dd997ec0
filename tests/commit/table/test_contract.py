"""The table contract: the promises every table format keeps, written once and run on every
row of the table-format registry (commit/table/registry.py), in fsspec's abstract-test style:
a new format passes by adding its row (and its package), with no test of its own to copy.

Every check reads the table through the format's own reader (`read_rows`), the table's own
record of what the job's transaction did (`commits_of_job`: the job's uuid in a Delta commit,
an Iceberg snapshot's summary, a Hudi instant) and the files its versions reference
(`referenced_files`), never by listing files. The format-specific tests (each format's log,
layout, options and interop with its own writer) stay in test_delta.py, test_iceberg.py and
test_hudi.py.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.registry import FORMATS, TableFormatSpec
from dataferry.engine.attempt import AttemptFailure
from dataferry.engine.local import LocalEngineConfig
from dataferry.errors import DestinationError, InjectedCrash
from dataferry.store import FaultRule, Op, open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

COLUMNS = ["id", "value", "s", "day"]


def frame(start: int, n: int = 30, days: int = 3) -> pa.Table:
    """Small rows of exact values: int64 ids (the record key), floats, strings, a day."""
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "value": pa.array([i / 4 for i in ids], pa.float64()),
            "s": pa.array([f"s{i}" for i in ids]),
            "day": pa.array([f"2024-01-0{1 + i % days}" for i in ids]),
        }
    )


def as_rows(table: pa.Table) -> list[dict[str, Any]]:
    return table.select(COLUMNS).sort_by("id").to_pylist()


@dataclass
class Table:
    """One format's table at a destination: the suite's writes and reads, through the
    format's registry row."""

    spec: TableFormatSpec
    dest: Path

    def write(
        self, data: pa.Table, mode="append", faults=(), partition_by=("day",), insert=False, **kw
    ):
        """A write keyed by `id`; `insert`: rows added as they are (no merge by key)."""
        store = open_store(str(self.dest), faults=list(faults))
        options = {
            **self.spec.key_options("id"),
            **(dict(self.spec.insert_options) if insert else {}),
        }
        return dataferry.write_dataset(
            data,
            store,
            partition_by=list(partition_by),
            committer=self.spec.name,
            mode=mode,
            committer_options=options,
            **kw,
        )

    def committer(self):
        return committer_by_name(self.spec.name, open_store(str(self.dest)))

    def rows(self) -> list[dict[str, Any]]:
        found = self.committer().read_rows()
        return [] if found is None else as_rows(found)

    def landed(self, result) -> int:
        return self.committer().commits_of_job(result.run.job.job_uuid)

    def data_files(self) -> set[str]:
        """Every Parquet file in the table's storage outside hidden directories."""
        return {
            p.relative_to(self.dest).as_posix()
            for p in self.dest.rglob("*.parquet")
            if not any(part.startswith(("_", ".")) for part in p.relative_to(self.dest).parts)
        }

    def orphans(self) -> set[str]:
        return self.data_files() - self.committer().referenced_files()

    def leftovers(self) -> list[str]:
        """What a job's commit machinery left: claims, markers, intents (not the table's log,
        nor the drivers' records, which outlive a job that recovered a dead one)."""
        root = self.dest / "_dataferry"
        found = root.rglob("*") if root.exists() else ()
        return sorted(str(p) for p in found if p.is_file() and "drivers" not in p.parts)


def _params() -> list:
    out = []
    for spec in FORMATS.values():
        absent = [m for m in (*spec.needs, *spec.reader_needs) if not importlib.util.find_spec(m)]
        marks = [pytest.mark.skip(reason=f"{absent[0]} is not installed")] if absent else []
        out.append(pytest.param(spec, id=spec.name, marks=marks))
    return out


@pytest.fixture(params=_params())
def table(request, tmp_path) -> Table:
    return Table(request.param, tmp_path / "t")


# --- writes --------------------------------------------------------------------------------


def test_appends_add_exactly_the_jobs_rows_each_landed_once(table):
    """Broken, a reader misses rows, sees them twice, or sees values changed on the way."""
    first = table.write(frame(0), mode="error")
    second = table.write(frame(100))
    assert table.rows() == as_rows(pa.concat_tables([frame(0), frame(100)]))
    assert table.landed(first) == 1 and table.landed(second) == 1
    assert table.orphans() == set() and table.leftovers() == []


def test_overwrite_replaces_every_row_in_one_transaction(table):
    """Broken, an overwrite leaves old rows visible or needs more than one version to land."""
    table.write(frame(0))
    result = table.write(frame(500, 10), mode="overwrite")
    assert table.rows() == as_rows(frame(500, 10))
    assert table.landed(result) == 1
    assert table.orphans() == set()  # the old files stay referenced (time travel) or go


def test_a_partitioned_write_places_each_row_in_its_partition(table):
    """Broken, a reader filtering on the partition column finds the wrong rows."""
    table.write(frame(0))
    committer = table.committer()
    files = committer.referenced_files()
    assert files and all("day=2024-01-0" in f for f in files)
    for f in files:  # each file holds the rows of its directory's day
        day = f.split("day=", 1)[1].split("/", 1)[0]
        assert day in {"2024-01-01", "2024-01-02", "2024-01-03"}
    got = table.rows()
    assert {r["day"] for r in got} == {"2024-01-01", "2024-01-02", "2024-01-03"}
    assert got == as_rows(frame(0))


def test_an_unpartitioned_write(table):
    """Broken, a table without partition columns cannot be written or read back."""
    table.write(frame(0), partition_by=())
    table.write(frame(50), partition_by=())
    assert table.rows() == as_rows(pa.concat_tables([frame(0), frame(50)]))


def test_error_mode_refuses_an_existing_table_before_any_file_is_written(table):
    """Broken, mode='error' writes into a table that exists."""
    table.write(frame(0), mode="error")
    before = table.data_files()
    with pytest.raises(DestinationError):
        table.write(frame(100), mode="error")
    assert table.data_files() == before and table.rows() == as_rows(frame(0))


# --- failures --------------------------------------------------------------------------------


def test_a_failed_job_leaves_nothing_visible_and_no_file(table):
    """Broken, a reader sees part of a failed job, or its files stay on storage for ever."""
    table.write(frame(0))
    before = table.data_files()

    def fail(job):
        raise RuntimeError("the driver gave up")

    with pytest.raises(RuntimeError, match="gave up"):
        table.write(frame(100), before_job_commit=fail)
    assert table.rows() == as_rows(frame(0))
    assert table.data_files() == before and table.orphans() == set()


def test_a_killed_driver_before_its_commit_leaves_nothing_visible(table):
    """Dead just before its commit was decided: its files lie in place, referenced by no
    version, and the next job rolls it back first. Broken, a dead job's rows become visible,
    its files stay for ever, or the table stays blocked."""
    table.write(frame(0))
    rule = FaultRule(action="crash", when="before", path_glob="*_commit_intent.json")
    with pytest.raises(InjectedCrash):
        table.write(frame(100), faults=[rule])
    assert table.rows() == as_rows(frame(0))
    assert table.orphans()  # the dead job's files, invisible to the format's reader
    table.write(frame(200))
    assert table.rows() == as_rows(pa.concat_tables([frame(0), frame(200)]))
    assert table.orphans() == set() and table.leftovers() == []


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_driver_killed_at_the_transaction_lands_exactly_once(table, when):
    """Dead just before the transaction (rolled forward from the intent) or just after it
    (found by landed(), not made again). Broken, the rows are lost or committed twice."""
    table.write(frame(0))
    rule = FaultRule(action="crash", when=when, kinds=frozenset({Op.TABLE_COMMIT}))
    with pytest.raises(InjectedCrash):
        table.write(frame(100), faults=[rule])
    report = cleanup_destination(open_store(str(table.dest)), older_than_s=0)
    assert report.rolled_forward and not report.failed, report
    assert table.rows() == as_rows(pa.concat_tables([frame(0), frame(100)]))
    assert table.orphans() == set() and table.leftovers() == []


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_lost_answer_from_the_table_lands_the_job_once(table, when):
    """An ambiguous answer on the transaction: it never reached the table, or it landed and
    the caller was told it failed. Broken, the job is applied twice or not at all."""
    table.write(frame(0))
    rule = FaultRule(action="ambiguous", when=when, kinds=frozenset({Op.TABLE_COMMIT}))
    result = table.write(frame(100), faults=[rule])
    assert rule.fired == 1
    assert table.rows() == as_rows(pa.concat_tables([frame(0), frame(100)]))
    assert table.landed(result) == 1 and table.orphans() == set()


def test_retried_and_speculative_attempts_are_committed_once(table):
    """Task 0 runs twice at once (speculation), task 1's first attempt dies after writing.
    Broken, the duplicate or the dead attempt's rows show up in the table."""
    engine = LocalEngineConfig(
        workers=2,
        executor="threads",
        speculate_tasks=(0,),
        failures=(AttemptFailure(1),),
    )
    result = table.write(frame(0, 90), engine=engine, tasks=3, insert=True)
    assert result.run.speculative_attempts == 1 and result.run.failed_attempts == 1
    assert table.rows() == as_rows(frame(0, 90))
    assert table.landed(result) == 1
    assert table.orphans() == set() and table.leftovers() == []


# --- what the table says -------------------------------------------------------------------


def test_landed_and_referenced_files_answer_for_the_table(table):
    """The hooks the referee and recovery read. Broken, a committed job is taken for a dead
    one (rolled back, its files deleted) or an orphan is taken for data."""
    committer = table.committer()
    assert committer.read_rows() is None and committer.referenced_files() == set()
    assert committer.commits_of_job("nobody") == 0
    first = table.write(frame(0))
    table.write(frame(300, 5), mode="overwrite")
    committer = table.committer()
    assert committer.commits_of_job(first.run.job.job_uuid) == 1
    assert table.data_files() == committer.referenced_files()
    live = set(committer.table_files())
    assert live and live <= committer.referenced_files()
    where = "/".join(p for p in (committer.data_root, "day=2024-01-01", "stray.parquet") if p)
    (table.dest / where).write_bytes(b"not ours")
    assert where in table.data_files() and where not in table.committer().referenced_files()


def test_concurrent_appenders_all_land(table):
    """Jobs appending at once. Broken, one job's rows are lost or its transaction is made
    twice."""
    table.write(frame(0))
    results: list[Any] = []
    errors: list[BaseException] = []

    def append(k: int) -> None:
        try:
            results.append(table.write(frame(1000 * k, 10)))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=append, args=(k,)) for k in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    want = [frame(0), *(frame(1000 * k, 10) for k in (1, 2, 3))]
    assert table.rows() == as_rows(pa.concat_tables(want))
    assert all(table.landed(r) == 1 for r in results)
    assert table.orphans() == set() and table.leftovers() == []
