"""Writes from Daft (`dataferry.daft`: `write_dataset`, `write_deltalake`, `CommitSink` with
`df.write_sink`) on Daft's native runner, through every committer family, read back row for row
by pyarrow, polars and the tables' own readers.

Daft's native runner makes one write call per micropartition (a frame made of four Arrow
tables: four calls, four task attempts) and neither retries nor duplicates a call. What its
Ray runner does to calls (a call rerun after its worker died, before or after its task commit;
a duplicate whose result Daft drops; a call in another process, on a pickled sink) is played
here by hand on the sink, as tests/engine/test_dask_write.py plays Dask's reruns. A killed
driver is a child process (`daft_child.py`) that SIGKILLs itself through the store layer's
fault injection.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

daft = pytest.importorskip("daft")
pl = pytest.importorskip("polars")

from daft.recordbatch import MicroPartition  # noqa: E402

import dataferry  # noqa: E402
import dataferry.daft as fd  # noqa: E402
from dataferry import make_committer, open_store  # noqa: E402
from dataferry.daft import CommitSink  # noqa: E402
from dataferry.errors import (  # noqa: E402
    ConfigError,
    DestinationError,
    EngineError,
    InjectedCrash,
    TaskCommitError,
)
from dataferry.stats import IOStatistics  # noqa: E402

N, CALLS = 1_200, 4
FILE_COMMITTERS = ["v1", "manifest", "direct", "hive", "magic", "directory", "partitioned"]
ON_S3_MODEL = {"magic", "directory", "partitioned"}  # they need multipart upload
TABLE_OPTIONS = {"delta": {}, "iceberg": {}, "hudi": {"table_name": "sales", "record_key": "id"}}
CHILD = Path(__file__).with_name("daft_child.py")
RAY_CHILD = Path(__file__).with_name("daft_ray_child.py")


@pytest.fixture(autouse=True, scope="module")
def native_runner():
    """Daft on its native runner, as this module means it. Daft picks a process's runner
    once, at its first query, and picks Ray's when Ray is initialized in the process (the
    engine tests' `local_ray` keeps it up for the whole package): left to choose, these
    tests would run on Ray's runner after any Ray test in the same process."""
    try:
        daft.set_runner_native()
    except daft.exceptions.DaftCoreException:  # set already (once per process)
        pass
    assert daft.get_or_infer_runner_type() == "native", "an earlier test set Ray's runner"


def table(n: int = N, offset: int = 0) -> pa.Table:
    ids = list(range(offset, offset + n))
    return pa.table(
        {"id": ids, "day": [f"d{i % 3}" for i in ids], "v": [i * 0.5 for i in ids]},
        schema=pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.float64())]),
    )


def pieces(t: pa.Table, calls: int = CALLS) -> list[pa.Table]:
    step = -(-t.num_rows // calls)
    return [t.slice(i, step) for i in range(0, t.num_rows, step)]


def frame(t: pa.Table, calls: int = CALLS):
    """A Daft frame the native runner writes in `calls` write calls."""
    return daft.from_arrow(pieces(t, calls))


def rows(t: pa.Table) -> list[tuple]:
    cols = [
        t.column(c).cast(pa.string()) if c == "day" else t.column(c) for c in ("id", "day", "v")
    ]
    return sorted(zip(*(c.to_pylist() for c in cols), strict=True))


def dest_of(tmp_path: Path, committer: str):
    """Where a committer writes: a directory, behind the S3 model where it needs multipart."""
    out = tmp_path / "out"
    if committer in ON_S3_MODEL:
        return out, open_store(f"sim:s3:{out}", latency_scale=0.0)
    return out, str(out)


def read_rows(out: Path) -> list[tuple]:
    """The rows pyarrow's dataset reads, checked against polars' read of the visible files
    (the S3 model keeps its uploads' parts in a hidden directory, which S3 would not show)."""
    by_arrow = rows(pads.dataset(str(out), format="parquet", partitioning="hive").to_table())
    df = pl.read_parquet([str(out / f) for f in visible_files(out)], hive_partitioning=True)
    by_polars = sorted(zip(df["id"].to_list(), df["day"].to_list(), df["v"].to_list(), strict=True))
    assert by_arrow == by_polars
    return by_arrow


def table_rows(name: str, out: Path) -> list[tuple]:
    """The table's rows as its format's own reader reads them (deltalake, and polars, for
    Delta; pyiceberg; hudi-rs)."""
    t = make_committer(name, str(out)).read_rows()
    got = rows(t)
    if name == "delta":
        import deltalake

        assert rows(deltalake.DeltaTable(str(out)).to_pyarrow_table()) == got
        df = pl.read_delta(str(out))
        assert (
            sorted(zip(df["id"].to_list(), df["day"].to_list(), df["v"].to_list(), strict=True))
            == got
        )
    return got


def all_files(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())


def visible_files(out: Path) -> list[str]:
    return [f for f in all_files(out) if not any(part[0] in "_." for part in f.split("/"))]


def leftovers(out: Path) -> list[str]:
    """What a committed or aborted job must not leave: attempt and job directories, markers,
    driver and intent records (the direct committer's record of committed jobs stays)."""
    return [
        f
        for f in all_files(out)
        if f.startswith(("_temporary/", "__magic", "_dataferry/"))
        and not f.startswith("_dataferry/commits/")
    ]


# --- every committer family --------------------------------------------------------------------


@pytest.mark.parametrize("committer", FILE_COMMITTERS)
def test_every_file_committer_writes_each_row_once(tmp_path, committer):
    t = table()
    out, dest = dest_of(tmp_path, committer)
    result = fd.write_dataset(frame(t), dest, partition_by=["day"], committer=committer)
    assert read_rows(out) == rows(t)
    assert (result.committer, result.rows, result.partitions) == (committer, N, 3)
    assert result.stats["tasks"] == CALLS  # one task attempt per Daft write call
    assert result.files == len(visible_files(out)) == CALLS * 3
    assert {f.split("/")[0] for f in visible_files(out)} == {"day=d0", "day=d1", "day=d2"}
    assert leftovers(out) == []


def test_modes_append_overwrite_and_overwrite_partitions(tmp_path):
    out = tmp_path / "out"
    first, second = table(600), table(300, offset=1000)
    fd.write_dataset(frame(first), out, partition_by=["day"])
    fd.write_dataset(
        frame(second), out, partition_by=["day"], existing_data_behavior="overwrite_or_ignore"
    )
    assert read_rows(out) == sorted(rows(first) + rows(second))
    only_d0 = second.filter(pc.equal(second["day"], "d0"))
    fd.write_dataset(frame(only_d0, 1), out, partition_by=["day"], mode="overwrite-partitions")
    kept = [r for r in rows(first) + rows(second) if r[1] != "d0"]
    assert read_rows(out) == sorted(kept + rows(only_d0))
    fd.write_dataset(frame(second), out, partition_by=["day"], mode="overwrite")
    assert read_rows(out) == rows(second)


@pytest.mark.parametrize("name", sorted(TABLE_OPTIONS))
def test_tables_append_then_overwrite(tmp_path, name):
    out = tmp_path / "sales"
    first, second = table(600), table(600, offset=1000)
    kw = {"partition_by": ["day"], "committer": name, "committer_options": TABLE_OPTIONS[name]}
    fd.write_dataset(frame(first), out, **kw)
    result = fd.write_dataset(frame(second), out, mode="append", **kw)
    assert result.committer == name and result.rows == 600
    assert table_rows(name, out) == sorted(rows(first) + rows(second))
    fd.write_dataset(frame(second), out, mode="overwrite", **kw)
    assert table_rows(name, out) == rows(second)


def test_an_iceberg_table_is_split_by_its_spec(tmp_path):
    """The committer's key columns are added before a call splits its rows: without them a
    file would hold ids of several buckets, and the commit would refuse it."""
    pytest.importorskip("pyiceberg_core")
    from tests.engine.test_table_engines import files_lie_in_one_bucket

    out, t = tmp_path / "sales", table(60)
    options = {"partition_spec": ["bucket[4](id)"]}
    fd.write_dataset(frame(t), out, committer="iceberg", committer_options=options)
    assert table_rows("iceberg", out) == rows(t)
    assert files_lie_in_one_bucket(out, 4) >= 4


def test_write_deltalake_modes(tmp_path):
    import deltalake

    out = tmp_path / "sales"
    first, second = table(300), table(300, offset=1000)
    fd.write_deltalake(frame(first), out, partition_by=["day"], description="from daft")
    result = fd.write_deltalake(frame(second), deltalake.DeltaTable(str(out)), mode="append")
    assert result is not None and result.rows == 300
    assert table_rows("delta", out) == sorted(rows(first) + rows(second))
    assert fd.write_deltalake(frame(second), out, mode="ignore") is None
    assert deltalake.DeltaTable(str(out)).version() == 1
    with pytest.raises(DestinationError):
        fd.write_deltalake(frame(second), out)
    fd.write_deltalake(frame(second), out, mode="overwrite")
    assert table_rows("delta", out) == rows(second)
    assert deltalake.DeltaTable(str(out)).metadata().description == "from daft"
    assert deltalake.DeltaTable(str(out)).metadata().partition_columns == ["day"]


def test_write_sink_returns_what_was_written(tmp_path):
    """The sink as Daft users call it: ``df.write_sink(sink)``, one row saying what it wrote."""
    t = table()
    sink = CommitSink(tmp_path / "out", partition_cols=["day"], compression="zstd")
    with sink:
        summary = frame(t).write_sink(sink).to_pydict()
    assert summary["rows"] == [N] and summary["files"] == [CALLS * 3]
    assert summary["committer"] == [sink.result.committer]
    assert summary["job_id"] == [sink.result.job_id]
    assert read_rows(tmp_path / "out") == rows(t)
    assert sink.job is None  # ended: a later abort (the `with`'s) has nothing to undo


def test_store_statistics_count_each_operation_once(tmp_path):
    """The native runner's calls count on the driver's own store: taking their counts again
    from their results would report each of their operations twice."""
    store = open_store(str(tmp_path / "out"))
    before = store.stats.snapshot()
    result = fd.write_dataset(frame(table()), store, partition_by=["day"], committer="manifest")
    counted = result.run.store_stats.counter_values()
    assert counted == IOStatistics(store.stats.diff(before)).counter_values()
    assert counted["op_create"] >= CALLS * 3


# --- write calls as a distributed runner makes them ------------------------------------------


def micropartitions(tables):
    return iter([MicroPartition.from_arrow(x) for x in tables])


def call(sink: CommitSink, tables, die=None):
    """One Daft write call of `tables` on `sink`; its WriteResult."""
    sink._die = die
    try:
        (result,) = list(sink.write(micropartitions(tables)))
    finally:
        sink._die = None
    return result


def call_in_a_process(state: bytes, tables: list[pa.Table]):
    """A write call on a worker process: the sink as the Ray runner ships it, pickled."""
    sink = pickle.loads(state)
    return call(sink, tables)


def test_write_calls_run_in_other_processes_on_a_pickled_sink(tmp_path):
    t = table()
    sink = CommitSink(tmp_path / "out", partition_by=["day"], schema=t.schema)
    sink.start()
    state = pickle.dumps(sink)
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        results = list(pool.map(call_in_a_process, [state] * CALLS, [[p] for p in pieces(t)]))
    sink.finalize(results)
    assert read_rows(tmp_path / "out") == rows(t)
    assert sink.result.stats["tasks"] == CALLS
    # the workers' counts came back with their results: each data file's write among them
    assert sink.result.run.store_stats.counter("op_create") >= CALLS * 3
    assert leftovers(tmp_path / "out") == []


def dies_once(stage: str):
    """A worker that dies (its process gone: no abort) at `stage` of its first call."""
    fired = []

    def die(attempt, at: str) -> None:
        if at == stage and not fired:
            fired.append(attempt.task_index)
            raise InjectedCrash(f"worker died with its call {stage}")

    return die


@pytest.mark.parametrize("committer", ["manifest", "v1", "direct", "magic"])
@pytest.mark.parametrize("stage", ["written", "committed"])
def test_a_call_rerun_after_its_worker_died_is_counted_once(tmp_path, committer, stage):
    """The Ray runner reruns a call whose worker died, before its task commit or after it
    (its result lost with the worker): were the dead call's files or committed attempt taken
    into the job, its rows would be there twice or half-written."""
    t = table()
    out, dest = dest_of(tmp_path, committer)
    sink = CommitSink(dest, partition_by=["day"], committer=committer, schema=t.schema)
    sink.start()
    parts = pieces(t)
    with pytest.raises(InjectedCrash):
        call(sink, [parts[1]], die=dies_once(stage))
    kept = [call(sink, [p]) for p in parts]  # the rerun of call 1 is among them
    sink.finalize(kept)
    assert read_rows(out) == rows(t)
    assert sink.result.files == len(visible_files(out)) == CALLS * 3
    assert leftovers(out) == []


@pytest.mark.parametrize("committer", ["manifest", "direct"])
def test_a_duplicate_call_whose_result_is_dropped_is_left_out(tmp_path, committer):
    """Two calls of the same rows both commit their attempts (a speculative copy); Daft keeps
    one result. Were every committed attempt taken, each row of it would appear twice."""
    t = table()
    out, dest = dest_of(tmp_path, committer)
    sink = CommitSink(dest, partition_by=["day"], committer=committer, schema=t.schema)
    sink.start()
    parts = pieces(t)
    kept = [call(sink, [p]) for p in parts]
    duplicate = call(sink, [parts[2]])
    assert duplicate.result.message is not None  # committed, like its twin
    sink.finalize(kept)
    assert read_rows(out) == rows(t)
    assert len(visible_files(out)) == CALLS * 3
    assert leftovers(out) == []


def test_a_call_that_commits_after_the_job_removes_its_output(tmp_path):
    """A late duplicate whose task commit comes after the job's: it finds the job ended and
    removes what it wrote, so no reader ever counts its rows."""
    t = table()
    out = tmp_path / "out"
    sink = CommitSink(out, partition_by=["day"], committer="direct", schema=t.schema)
    sink.start()
    parts = pieces(t)
    kept = [call(sink, [p]) for p in parts]

    def job_commits_meanwhile(attempt, at: str) -> None:
        if at == "written":
            sink.finalize(kept)

    with pytest.raises(TaskCommitError, match="ended while the attempt ran"):
        call(sink, [parts[0]], die=job_commits_meanwhile)
    assert read_rows(out) == rows(t)
    assert len(visible_files(out)) == CALLS * 3
    assert not [f for f in all_files(out) if "part-" in f and f not in visible_files(out)]


# --- failures: nothing visible ------------------------------------------------------------------


def fails_at_777(x: int) -> int:
    if x == 777:
        raise RuntimeError("injected failure at row 777")
    return x


@pytest.mark.parametrize("committer", ["manifest", "direct"])
def test_a_failed_write_is_aborted_and_leaves_nothing(tmp_path, committer):
    """One micropartition's computation fails while the others are written and committed:
    the job is aborted (direct writes in place: only the abort removes its files)."""
    df = frame(table())
    bad = df.with_column("id", df["id"].apply(fails_at_777, return_dtype=daft.DataType.int64()))
    out = tmp_path / "out"
    with pytest.raises(Exception, match="User-defined function"):
        fd.write_dataset(bad, out, partition_by=["day"], committer=committer)
    assert all_files(out) == []
    # the sink used directly, in its `with`
    with (
        pytest.raises(Exception, match="User-defined function"),
        CommitSink(out, partition_by=["day"], committer=committer) as sink,
    ):
        bad.write_sink(sink)
    assert all_files(out) == []


def test_an_abort_waits_for_the_calls_still_writing_and_refuses_new_ones(tmp_path):
    """Daft raises as soon as one call fails while other calls of the process still write:
    an abort that did not wait for them would roll the job back and then let them leave their
    files in place (direct writes in place: plain readers would see them)."""
    t = table()
    out = tmp_path / "out"
    sink = CommitSink(out, partition_by=["day"], committer="direct", schema=t.schema)
    sink.start()
    written, release = threading.Event(), threading.Event()

    def hold(attempt, step):  # the call has written its files and is about to commit
        if step == "written":
            written.set()
            release.wait(30)

    writer = threading.Thread(target=call, args=(sink, [pieces(t)[0]], hold))
    writer.start()
    assert written.wait(30)
    aborter = threading.Thread(target=sink.abort)
    aborter.start()
    time.sleep(0.3)
    assert aborter.is_alive(), "the abort must wait for the call still writing"
    release.set()
    writer.join(30)
    aborter.join(30)
    assert all_files(out) == []
    with pytest.raises(EngineError, match="aborted"):  # a call arriving after the abort
        call(sink, [pieces(t)[1]])
    assert visible_files(out) == []


def test_a_sink_reused_after_a_failed_write_aborts_the_job_it_left_open(tmp_path):
    """Without `with`, a failed write_sink leaves its job open (Daft has no failure hook):
    here three calls committed, then Daft raised and never called finalize. The sink's next
    start aborts that job, so the committed calls' in-place files do not linger."""
    t = table()
    out = tmp_path / "out"
    sink = CommitSink(out, partition_by=["day"], committer="direct", schema=t.schema)
    sink.start()
    for p in pieces(t)[:3]:
        call(sink, [p])
    assert len(visible_files(out)) == 3 * 3  # direct: in place, and seen by plain readers
    frame(t).write_sink(sink)
    assert read_rows(out) == rows(t)
    assert len(visible_files(out)) == CALLS * 3 and leftovers(out) == []


def test_bad_options_fail_on_the_driver_before_any_write(tmp_path):
    df = frame(table())
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"takes a daft\.DataFrame, got Table"):
        fd.write_dataset(table(), out)
    with pytest.raises(ConfigError, match="'month' is not in the data"):
        fd.write_dataset(df, out, partition_by=["month"])
    with pytest.raises(ConfigError, match="did you mean 'max_rows_per_file'"):
        fd.write_dataset(df, out, max_rows_per_fil=10)
    with pytest.raises(ConfigError, match="compression"):
        CommitSink(out, compression="nope")
    with pytest.raises(ConfigError, match="not both"):
        CommitSink(out, partition_by=["day"], partition_cols=["day"])
    with pytest.raises(ConfigError, match="schema must be"):
        CommitSink(out, schema=["id"])
    with pytest.raises(EngineError, match="before start"):
        call(CommitSink(out), pieces(table()))
    assert not out.exists() or all_files(out) == []
    fd.write_dataset(df, out, partition_by=["day"])
    before = all_files(out)
    with pytest.raises(DestinationError, match="mode"):
        fd.write_dataset(df, out, partition_by=["day"])
    assert all_files(out) == before


def test_the_type_zoo_is_read_back_value_for_value(tmp_path):
    """Every type of the zoo, written from Daft and read back by pyarrow with its values;
    a dictionary column, which Daft holds as Python objects (Arrow would write pickled bytes
    no reader understands), is refused on the driver (and by a task, without the schema)."""
    from dataferry.verify.type_zoo import PARTITION, type_zoo

    zoo = type_zoo()
    df = daft.from_arrow(zoo)
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="column 'cat' holds Python objects"):
        fd.write_dataset(df, out, partition_by=[PARTITION])
    with (
        pytest.raises(Exception, match="column 'cat' holds Python objects"),
        CommitSink(out) as sink,
    ):
        df.write_sink(sink)
    assert all_files(out) == []
    df = df.with_column("cat", df["cat"].cast(daft.DataType.string()))
    fd.write_dataset(df, out, partition_by=[PARTITION])
    back = pads.dataset(str(out), format="parquet", partitioning="hive").to_table().sort_by("id")
    assert back.num_rows == zoo.num_rows
    for name in zoo.column_names:  # (repr: NaN equals itself)
        assert repr(back[name].to_pylist()) == repr(zoo[name].to_pylist()), name


# --- a killed driver -----------------------------------------------------------------------------


def run_child(spec: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), json.dumps(spec)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("committer", "kill", "committed"),
    [
        pytest.param("manifest", {"op": "write", "n": 3}, False, id="manifest-while-tasks-write"),
        pytest.param("direct", "before_job_commit", False, id="direct-before-job-commit"),
        pytest.param("manifest", {"op": "rename", "n": 3}, True, id="manifest-mid-job-commit"),
    ],
)
def test_a_killed_driver_leaves_nothing_visible_and_cleanup_recovers(
    tmp_path, committer, kill, committed
):
    """The driver (and with Daft's native runner its write calls) dies at a store operation:
    readers see the data set as it was (of `direct`'s in-place files, those its commit
    records list, as docs/reading.md says); `dataferry cleanup` then rolls the job back (or, past
    its intent record, forward) and leaves no job or attempt file behind."""
    from tests.commit.job.atomicity_child import make_table
    from tests.commit.job.test_job_atomicity import cleanup, listing, read_rows, rows_of

    dest = tmp_path / "table"
    old = make_table("old", 400, 6, offset=50_000)
    dataferry.write_dataset(old, str(dest), partition_by=["p"], committer=committer)
    spec = {"dest": str(dest), "committer": committer, "mode": "append", "kill": kill}
    child = run_child({**spec, "label": "new", "rows": 800, "parts": 6})
    assert child.returncode == -9, f"not killed at {kill}:\n{child.stderr}"
    if not committed:  # killed before its commit: nothing of the job is visible
        assert committed_rows(dest, committer) == rows_of(old), listing(dest)
    out = cleanup(dest, "--json")
    assert leftovers(dest) == [], out + listing(dest)
    new = rows_of(make_table("new", 800, 6))
    expected = sorted(rows_of(old) + new) if committed else rows_of(old)
    assert read_rows(dest) == expected, out + listing(dest)


def committed_rows(dest: Path, committer: str) -> list[tuple]:
    """The rows a reader of committed data sees (for `direct`: of `list_committed`'s files)."""
    from tests.commit.job.test_job_atomicity import read_rows, rows_of

    if committer != "direct":
        return read_rows(dest)
    from dataferry.commit.direct import list_committed

    files = [str(dest / f) for f in list_committed(str(dest)) if f.endswith(".parquet")]
    return rows_of(pads.dataset(files, format="parquet", partitioning="hive").to_table())


# --- readers during and after a job -------------------------------------------------------------


def test_readers_see_the_earlier_rows_during_a_job_and_all_rows_after_it(tmp_path):
    from tests.dataset.test_readers import EARLIER, NEW, check, counts, earlier

    dest, frozen = tmp_path / "out", tmp_path / "frozen"
    earlier(dest)
    during: dict = {}

    def before_job_commit(job) -> None:  # every call committed, the job commit not begun
        during.update(counts(dest))
        shutil.copytree(dest, frozen)  # what a driver killed here leaves behind

    fd.write_dataset(
        frame(NEW, 3),
        dest,
        partition_by=["day"],
        mode="append",
        before_job_commit=before_job_commit,
    )
    check(during, EARLIER.num_rows, running=True)
    check(counts(frozen), EARLIER.num_rows, running=True)
    check(counts(dest), EARLIER.num_rows + NEW.num_rows, running=False)
    assert daft.read_parquet(f"{dest}/**/*.parquet").count_rows() == EARLIER.num_rows + NEW.num_rows


def test_a_delta_reader_sees_the_old_version_during_a_job(tmp_path):
    import deltalake

    out = tmp_path / "sales"
    first, second = table(300), table(300, offset=1000)
    fd.write_dataset(frame(first), out, partition_by=["day"], committer="delta")
    seen = []

    def before_job_commit(job) -> None:
        seen.append(rows(deltalake.DeltaTable(str(out)).to_pyarrow_table()))

    fd.write_dataset(
        frame(second),
        out,
        partition_by=["day"],
        committer="delta",
        mode="append",
        before_job_commit=before_job_commit,
    )
    assert seen == [rows(first)]
    assert table_rows("delta", out) == sorted(rows(first) + rows(second))


# --- Daft's Ray runner: a write call whose worker dies is rerun --------------------------------


@pytest.mark.slow
def test_on_the_ray_runner_a_call_whose_worker_died_is_rerun_and_counted_once(tmp_path):
    """Daft's Ray runner (in a child process: the runner is chosen once per process) ships a
    pickled sink to its workers; the worker of one write call exits after writing its files,
    then in a second write after its task commit, and Daft reruns the call elsewhere. Were
    the dead call's files or committed attempt taken into the job, rows would be doubled."""
    pytest.importorskip("ray")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    done = subprocess.run(
        [sys.executable, str(RAY_CHILD), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["stage"] for r in reports] == ["written", "committed"]
    for r in reports:
        out = tmp_path / r["stage"]
        assert r["died"], f"no worker died at {r['stage']}"
        back = pads.dataset(str(out), format="parquet", partitioning="hive").to_table()
        assert sorted(back["id"].to_pylist()) == list(range(1_000))
        assert r["rows"] == 1_000 and r["files"] == len(visible_files(out)) == 4 * 3
        assert leftovers(out) == []
