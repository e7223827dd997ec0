"""`dataferry.dask.to_parquet` (one Dask graph: setup, a write task per partition, commit) on
Dask's local schedulers and on a real LocalCluster, and `write_dataset` fed lazily."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
from dask.delayed import Delayed  # noqa: E402

import dataferry.dask as fdask  # noqa: E402
from dataferry.commit.factory import make_committer  # noqa: E402
from dataferry.commit.lookup import committer_for  # noqa: E402
from dataferry.dask.write import (  # noqa: E402
    WriteSpec,
    commit_job_task,
    frame_spec,
    setup_job_task,
    write_partition_task,
)
from dataferry.dataset.options import WriteOptions  # noqa: E402
from dataferry.dataset.write import WriteResult, open_destination  # noqa: E402
from dataferry.errors import ConfigError, DestinationError  # noqa: E402

THREADS = {"scheduler": "threads"}
N, PARTS = 4000, 4


def frame(n=N, parts=PARTS, offset=0, index_name=None):
    rng = np.random.default_rng(offset)
    pdf = pd.DataFrame(
        {
            "id": np.arange(offset, offset + n),
            "day": np.array([f"d{i % 4}" for i in range(n)]),
            "v": rng.random(n),
        }
    )
    if index_name is not None:
        pdf.index = pd.Index(np.arange(n) * 10, name=index_name)
    return pdf, dd.from_pandas(pdf, npartitions=parts)


def read_back(path) -> pd.DataFrame:
    """The columns stored in the files (the pandas metadata would turn an index column back
    into the index)."""
    table = pads.dataset(str(path), format="parquet", partitioning="hive").to_table()
    return table.replace_schema_metadata(None).to_pandas()


def data_files(path) -> list[Path]:
    """Files a reader sees: none under a directory or with a name starting with _ or .
    Hidden directories are not entered: a failed job's late tasks may still be removing
    their own attempts there (Dask does not cancel running tasks when a computation fails)."""
    found = []
    for parent, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d[0] not in "_.")
        found += [Path(parent, f) for f in sorted(files) if f[0] not in "_."]
    return found


def assert_exactly(path, pdf: pd.DataFrame) -> pd.DataFrame:
    """Every row of `pdf` is at `path` once, with its values."""
    back = read_back(path)
    assert len(back) == len(pdf)
    assert sorted(back["id"]) == sorted(pdf["id"])
    merged = back.merge(pdf, on="id", suffixes=("", "_in"))
    assert (merged["day"].astype(str) == merged["day_in"].astype(str)).all()
    assert np.allclose(merged["v"], merged["v_in"])
    return back


# --- functions the workers run (importable from this module) -------------------------------------


def _first_time(flag: str) -> bool:
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def fail_once(pdf, flag, victim, partition_info=None):
    if partition_info["number"] == victim and _first_time(flag):
        raise RuntimeError("injected failure, once")
    return pdf


def always_fail(pdf, victim, partition_info=None):
    if partition_info["number"] == victim:
        raise RuntimeError("injected failure, every time")
    return pdf


class FailOnceFS(LocalFileSystem):
    """A local file system whose first write of a data file of task `victim` happens, and then
    raises (action "raise") or kills the process (action "exit", as an OOM kill would)."""

    def __init__(self, flag: str = "", victim: int = 0, action: str = "raise", **kwargs):
        super().__init__(**kwargs)
        self.flag, self.victim, self.action = flag, victim, action

    def pipe_file(self, path, value, **kwargs):
        super().pipe_file(path, value, **kwargs)
        name = os.path.basename(str(path)).removeprefix(".dataferry-tmp-")  # (written aside)
        name = name.rsplit("%2F", 1)[-1]  # a file named flat: `day=d0%2Fpart-...`
        if name.startswith(f"part-{self.victim:05d}-") and _first_time(self.flag):
            if self.action == "exit":
                os._exit(1)
            raise OSError(f"injected failure after writing {name}")


# --- the local schedulers (no Client) ------------------------------------------------------------


def test_threads_write_commits_every_row_once(tmp_path):
    pdf, ddf = frame()
    out = tmp_path / "out"
    result = fdask.to_parquet(ddf, out, partition_on=["day"], compute_kwargs=THREADS)
    assert isinstance(result, WriteResult)
    assert (result.rows, result.partitions, result.committer) == (N, 4, "manifest")
    assert result.run.attempts == PARTS and len(result.run.messages) == PARTS
    assert result.files == len(data_files(out)) == PARTS * 4  # one file per partition per task
    assert (out / "_SUCCESS").exists()
    back = assert_exactly(out, pdf)
    assert set(back.columns) == {"id", "day", "v"}
    assert sorted(p.name for p in out.iterdir() if p.is_dir() and "=" in p.name) == [
        f"day=d{i}" for i in range(4)
    ]


def test_compute_false_is_lazy(tmp_path):
    pdf, ddf = frame()
    out = tmp_path / "out"
    pending = fdask.to_parquet(ddf, out, partition_on="day", compute=False)
    assert isinstance(pending, Delayed)
    assert not out.exists()  # not even the job's setup has run
    result = pending.compute(scheduler="threads")
    assert isinstance(result, WriteResult) and result.rows == N
    assert_exactly(out, pdf)


def test_sync_scheduler_and_dask_compute(tmp_path):
    pdf, ddf = frame()
    out = tmp_path / "out"
    (result,) = dask.compute(fdask.to_parquet(ddf, out, compute=False), scheduler="sync")
    assert result.rows == N
    assert_exactly(out, pdf)


def test_processes_scheduler(tmp_path):
    pdf, ddf = frame()
    out = tmp_path / "out"
    result = fdask.to_parquet(
        ddf,
        out,
        partition_on=["day"],
        compute_kwargs={"scheduler": "processes", "num_workers": 2},
    )
    assert result.rows == N and result.run.attempts == PARTS
    assert_exactly(out, pdf)


def test_writer_options_reach_the_files(tmp_path):
    pdf, ddf = frame()  # 4 partitions of 1000 rows
    out = tmp_path / "out"
    result = fdask.to_parquet(
        ddf,
        out,
        compression="zstd",
        row_group_size=300,
        max_rows_per_file=700,
        write_statistics=False,
        compute_kwargs=THREADS,
    )
    files = sorted(data_files(out))
    assert len(files) == result.files == 2 * PARTS  # each task: 700 rows, then 300
    for f in files:
        meta = pq.ParquetFile(f).metadata
        assert meta.num_rows in (700, 300)
        assert all(meta.row_group(i).num_rows <= 300 for i in range(meta.num_row_groups))
        column = meta.row_group(0).column(0)
        assert column.compression == "ZSTD"
        assert not column.is_stats_set
    assert pq.ParquetFile(files[0]).metadata.row_group(0).num_rows == 300
    assert_exactly(out, pdf)

    plain = tmp_path / "plain"
    fdask.to_parquet(ddf, plain, compute_kwargs=THREADS)  # Dask's default: snappy
    f = data_files(plain)[0]
    assert pq.ParquetFile(f).metadata.row_group(0).column(0).compression == "SNAPPY"


def test_bad_options_fail_before_anything_is_written(tmp_path):
    _, ddf = frame()
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="no_such_option"):
        fdask.to_parquet(ddf, out, no_such_option=1, compute_kwargs=THREADS)
    with pytest.raises(ValueError, match="not in the data"):
        fdask.to_parquet(ddf, out, partition_on=["nope"], compute_kwargs=THREADS)
    with pytest.raises(ValueError, match="basename_template"):
        fdask.to_parquet(ddf, out, name_function=lambda i: f"p{i}.parquet")
    assert not out.exists()


@pytest.mark.parametrize(
    ("index_name", "write_index", "expected"),
    [
        (None, None, set()),  # row numbers: left out
        (None, False, set()),
        (None, True, {"__null_dask_index__"}),  # Dask's name for an unnamed index
        ("key", None, {"key"}),  # a named index carries data
        ("key", True, {"key"}),
        ("key", False, set()),
    ],
)
def test_write_index(tmp_path, index_name, write_index, expected):
    pdf, ddf = frame(index_name=index_name)
    out = tmp_path / "out"
    fdask.to_parquet(ddf, out, write_index=write_index, compute_kwargs=THREADS)
    back = assert_exactly(out, pdf)
    assert set(back.columns) == {"id", "day", "v"} | expected
    if expected:
        (col,) = expected
        by_id = back.set_index("id")[col]
        assert (by_id.loc[pdf["id"]].to_numpy() == pdf.index.to_numpy()).all()


def test_modes_error_append_overwrite(tmp_path):
    pdf, ddf = frame()
    out = tmp_path / "out"
    fdask.to_parquet(ddf, out, partition_on=["day"], compute_kwargs=THREADS)
    before = sorted(data_files(out))

    with pytest.raises(DestinationError, match="not empty"):
        fdask.to_parquet(ddf, out, partition_on=["day"], compute_kwargs=THREADS)
    assert sorted(data_files(out)) == before  # refused: nothing changed
    assert_exactly(out, pdf)

    more, ddf_more = frame(offset=N)
    fdask.to_parquet(ddf_more, out, partition_on=["day"], append=True, compute_kwargs=THREADS)
    assert_exactly(out, pd.concat([pdf, more]))

    new, ddf_new = frame(n=1000, parts=2, offset=10 * N)
    fdask.to_parquet(ddf_new, out, partition_on=["day"], overwrite=True, compute_kwargs=THREADS)
    assert_exactly(out, new)

    with pytest.raises(ValueError, match="not both"):
        fdask.to_parquet(ddf, out, append=True, overwrite=True)


@pytest.mark.parametrize("committer", ["manifest", "direct"])
def test_failure_that_never_recovers_leaves_nothing_visible(tmp_path, committer):
    """direct writes into the destination itself: only the job's abort removes its files."""
    _, ddf = frame(parts=6)
    bad = ddf.map_partitions(always_fail, 4, meta=ddf._meta)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="every time"):
        fdask.to_parquet(
            bad,
            out,
            partition_on=["day"],
            committer=committer,
            compute_kwargs={"scheduler": "sync"},  # tasks in a fixed order: 5 runs before 4
        )
    assert out.exists()  # the job was set up, tasks wrote and committed their attempts...
    assert data_files(out) == []  # ...and none of it is visible
    assert not (out / "_SUCCESS").exists()


@pytest.mark.parametrize("committer", ["manifest", "v1"])
def test_reruns_take_fresh_attempts_and_zombies_are_cleaned(tmp_path, committer):
    """What Dask does to write tasks, played by hand: a run of task 1 that died after
    writing a file in attempt 0, and task 2 run twice (its first run committed, then its
    result was lost with its worker and Dask ran it again, keeping the second result)."""
    pdf, ddf = frame()
    out = tmp_path / "out"
    com = make_committer(committer, open_destination(str(out)), mode="error")
    job = com.new_job()
    started = setup_job_task(com, job)
    assert setup_job_task(com, job).job == job  # Dask may run setup again: the job is kept
    dead = job.task(1, 0)
    dead_com = committer_for(job)
    dead_com.setup_task(dead)
    dead_com.write_file(dead, "day=d0/stray.parquet", b"not parquet")
    spec = WriteSpec(("day",), WriteOptions(), frame_spec(ddf, None))
    parts = [ddf.partitions[i].compute() for i in range(PARTS)]

    done = [write_partition_task(p, started, spec, {"number": i}) for i, p in enumerate(parts)]
    assert [d.attempt for d in done] == [0, 1, 0, 0]
    rerun = write_partition_task(parts[2], started, spec, {"number": 2})
    assert rerun.message is not None  # both runs of task 2 committed an attempt
    if committer == "manifest":  # a committed attempt keeps its directory until job commit
        assert rerun.attempt == 1
    # (v1's task commit moves the attempt's directory away: its number is free again, and
    # no two runs ever share a directory)
    done[2] = rerun

    result = commit_job_task(com, started, done)  # one result per task, as Dask keeps
    kept = [m.attempt_id.rsplit("_", 1)[1] for m in result.run.messages]
    assert kept == ["0", "1", str(rerun.attempt), "0"]
    assert result.rows == N and result.files == len(data_files(out))
    assert_exactly(out, pdf)  # neither the dead attempt's file nor the zombie's appear
    assert not any(p.name == "stray.parquet" for p in out.rglob("*"))


def test_write_dataset_without_a_client_says_what_to_do(tmp_path):
    _, ddf = frame()
    try:
        distributed.default_client()
    except ValueError:
        pass
    else:
        pytest.skip("a Client is current in this process")
    with pytest.raises(ValueError, match="to_parquet runs on any"):
        fdask.write_dataset(ddf, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_signature_has_dasks_names():
    ours = inspect.signature(fdask.to_parquet).parameters
    theirs = inspect.signature(dd.to_parquet).parameters
    assert set(theirs) - {"kwargs"} <= set(ours)
    assert ours["compression"].default == "snappy" and ours["partition_on"].default is None
    assert "WriteResult" in str(inspect.signature(fdask.to_parquet).return_annotation)
    assert "partition_by" in inspect.signature(fdask.write_dataset).parameters


def test_missing_dask_names_the_extra():
    code = (
        "import sys\n"
        "for m in ('dask', 'dask.dataframe', 'distributed'):\n"
        "    sys.modules[m] = None\n"
        "import dataferry.dask as d\n"
        "for call in (lambda: d.to_parquet(None, 'x'), lambda: d.shuffle(None, 'k')):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as e:\n"
        "        print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 2
    assert all("pip install 'dataferry[dask]'" in line for line in lines)


# --- a real LocalCluster (two worker processes) ------------------------------------------------


def nothing_held(client) -> bool:
    """No keys in the cluster's memory (what a write computed was not kept)."""
    for _ in range(50):
        if not any(client.has_what().values()):
            return True
        time.sleep(0.1)
    return False


def test_distributed_write(client, tmp_path):
    pdf, ddf = frame(parts=6)
    out = tmp_path / "out"
    result = fdask.to_parquet(ddf, out, partition_on=["day"])  # the Client is the default
    assert result.rows == N and result.run.attempts == 6 and result.committer == "manifest"
    assert result.run.store_stats.counters.get("op_create", 0) >= result.files
    assert_exactly(out, pdf)
    assert nothing_held(client)


def test_distributed_compute_false(client, tmp_path):
    pdf, ddf = frame()
    out = tmp_path / "out"
    pending = fdask.to_parquet(ddf, out, compute=False)
    assert isinstance(pending, Delayed) and not out.exists()
    assert client.compute(pending).result().rows == N
    assert_exactly(out, pdf)


def test_dask_retries_a_failed_task(client, tmp_path):
    pdf, ddf = frame()
    flaky = ddf.map_partitions(fail_once, str(tmp_path / "failed"), 2, meta=ddf._meta)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="once"):  # without retries the job fails...
        fdask.to_parquet(flaky, out, compute_kwargs={"retries": 0})
    assert data_files(out) == [] and not (out / "_SUCCESS").exists()  # ...and is aborted

    (tmp_path / "failed").unlink()
    result = fdask.to_parquet(flaky, out, compute_kwargs={"retries": 1})
    assert (tmp_path / "failed").exists() and result.rows == N
    assert_exactly(out, pdf)


def test_a_write_that_fails_after_writing_is_retried(client, tmp_path):
    pdf, ddf = frame()
    fs = FailOnceFS(flag=str(tmp_path / "failed"), victim=1, action="raise")
    out = tmp_path / "out"
    result = fdask.to_parquet(ddf, str(out), filesystem=fs, compute_kwargs={"retries": 1})
    assert (tmp_path / "failed").exists()  # attempt 0 of task 1 wrote a file, then failed
    assert result.rows == N
    assert_exactly(out, pdf)


def test_worker_killed_mid_write(client, tmp_path):
    """A worker process dies after writing a file of task 1: Dask runs the task again,
    which takes a new attempt; the dead attempt's file never appears, nor does any row of a
    task Dask ran twice appear twice."""
    pdf, ddf = frame()
    fs = FailOnceFS(flag=str(tmp_path / "killed"), victim=1, action="exit")
    out = tmp_path / "out"
    result = fdask.to_parquet(ddf, str(out), partition_on=["day"], filesystem=fs)
    assert (tmp_path / "killed").exists()
    task1 = [m for m in result.run.messages if m.task_id.endswith("_000001")]
    assert [m.attempt_id.rsplit("_", 1)[1] for m in task1] == ["1"]
    # tasks the dead worker had finished lost their results with it: Dask reran them too,
    # as new attempts (their committed attempt 0 is a zombie the job commit cleans up)
    assert result.run.failed_attempts >= 1
    assert_exactly(out, pdf)


def test_write_dataset_feeds_partitions_lazily(client, tmp_path):
    pdf, ddf = frame(parts=8)
    out = tmp_path / "out"
    result = fdask.write_dataset(
        ddf, str(out), partition_by=["day"], window=2, compression="zstd", client=client
    )
    assert result.stats["max_partitions_held"] <= 2 and result.stats["tasks"] == 8
    assert result.run.attempts == 8 and result.rows == N
    f = data_files(out)[0]
    assert pq.ParquetFile(f).metadata.row_group(0).column(0).compression == "ZSTD"
    assert_exactly(out, pdf)
    assert nothing_held(client)


def slow_unless_first(pdf, partition_info=None):
    """Partition 0 fails at once; the others are still writing when the graph fails."""
    if partition_info["number"] == 0:
        raise RuntimeError("injected failure, first partition")
    time.sleep(0.3)
    return pdf


# a failed task's file writer is ended with its stream, not later by the garbage collector
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_a_failed_graph_leaves_nothing_of_the_tasks_still_running(tmp_path):
    """Dask runs a failed graph's other tasks to their end: what they write after the abort is
    removed (by them, or by the abort's sweep after the driver record), so no reader's glob
    counts it and nothing is left for cleanup."""
    _, ddf = frame(parts=4)
    out = tmp_path / "out"
    bad = ddf.map_partitions(slow_unless_first, meta=ddf._meta)
    with pytest.raises(RuntimeError, match="first partition"):
        fdask.to_parquet(
            bad,
            out,
            partition_on=["day"],
            compute_kwargs={"scheduler": "threads", "num_workers": 4},
        )
    time.sleep(0.8)  # the other tasks end
    assert [p for p in out.rglob("*") if p.is_file()] == []


class _Threads:
    """A client whose scheduler knows two workers of 4 and 2 threads."""

    def scheduler_info(self):
        return {"workers": {"tcp://a:1": {"nthreads": 4}, "tcp://b:1": {"nthreads": 2}}}


def test_the_driver_feeds_every_worker_thread():
    """The lazy feed holds two partitions per worker thread, not per worker: with it counted
    per worker, a cluster of multi-threaded workers would leave most threads without a
    partition to write (4 of 6 idle here)."""
    from dataferry.dask.driver import DaskEngine
    from dataferry.dask.write import default_window

    engine = DaskEngine(_Threads())
    assert engine.threads == 6
    assert default_window(engine) == 12
