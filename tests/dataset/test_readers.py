"""What each popular reader sees of a dataferry data set: after a committed job exactly its
rows, during a job and after a failed one exactly the earlier rows.

The readers are read the way their users write them: pyarrow's dataset, pandas, polars on the
directory and on a `**/*.parquet` glob, DuckDB's glob with hive partitioning, Dask and Ray.
polars' directory read refuses a directory holding any non-empty file of another extension
(a job's records while it runs, Hadoop's JSON `_SUCCESS`): it may refuse during a job, but
it must never count a wrong number of rows, and after a commit it must read.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import dataferry

EARLIER = pa.table({"x": list(range(100)), "day": ["a", "b"] * 50})
NEW = pa.table({"x": list(range(1000, 1300)), "day": ["b", "c", "d"] * 100})
# the committers that publish by renaming: auto on a local disk is manifest
COMMITTERS = ["auto", "v1", "hive"]


def count_pyarrow(root: Path) -> int:
    import pyarrow.dataset as ds

    return ds.dataset(root, format="parquet", partitioning="hive").count_rows()


def count_pandas(root: Path) -> int:
    import pandas as pd

    return len(pd.read_parquet(root))


def count_polars_dir(root: Path) -> int:
    import polars as pl

    return pl.read_parquet(root).height


def count_polars_glob(root: Path) -> int:
    import polars as pl

    return pl.scan_parquet(f"{root}/**/*.parquet").collect().height


def count_duckdb(root: Path) -> int:
    import duckdb

    query = f"select count(*) from read_parquet('{root}/**/*.parquet', hive_partitioning=true)"
    return duckdb.sql(query).fetchall()[0][0]


def count_dask(root: Path) -> int:
    import dask.dataframe as dd

    return len(dd.read_parquet(str(root)).compute(scheduler="sync"))


READERS = {
    "pyarrow": count_pyarrow,
    "pandas": count_pandas,
    "polars-dir": count_polars_dir,
    "polars-glob": count_polars_glob,
    "duckdb-glob": count_duckdb,
    "dask": count_dask,
}
# may refuse a directory that holds a running or dead job's records (never miscount)
REFUSES_WHILE_RUNNING = {"polars-dir"}


def counts(root: Path) -> dict[str, int | str]:
    out: dict[str, int | str] = {}
    for name, reader in READERS.items():
        try:
            out[name] = reader(root)
        except Exception as e:  # a reader's refusal, reported as such
            out[name] = f"refused: {type(e).__name__}"
    return out


def check(seen: dict[str, int | str], rows: int, running: bool) -> None:
    wrong = {
        name: got
        for name, got in seen.items()
        if got != rows and not (running and name in REFUSES_WHILE_RUNNING and isinstance(got, str))
    }
    assert not wrong, f"expected {rows} rows; readers saw {wrong}"


def earlier(dest: Path) -> None:
    dataferry.write_dataset(EARLIER, dest, partition_by=["day"])


def append_new(dest: Path, committer: str, on_event) -> None:
    """The job under test: NEW appended in three tasks, `on_event` told of each step."""
    dataferry.write_dataset(
        NEW,
        dest,
        partition_by=["day"],
        committer=committer,
        mode="append",
        tasks=3,
        on_event=on_event,
    )


@pytest.mark.parametrize("committer", COMMITTERS)
def test_readers_see_the_earlier_rows_during_a_job_and_all_rows_after_it(committer, tmp_path):
    dest = tmp_path / "out"
    earlier(dest)
    during: dict[str, int | str] = {}
    frozen = tmp_path / "frozen"

    def on_event(event: str, task: int, attempt: int) -> None:
        if event == "job_commit_started":  # every task committed, the job commit not begun
            during.update(counts(dest))
            shutil.copytree(dest, frozen)  # what a driver killed here leaves behind

    append_new(dest, committer, on_event)
    check(during, EARLIER.num_rows, running=True)
    check(counts(frozen), EARLIER.num_rows, running=True)
    check(counts(dest), EARLIER.num_rows + NEW.num_rows, running=False)
    assert (dest / "_SUCCESS").stat().st_size == 0  # the marker every reader accepts


@pytest.mark.parametrize("committer", COMMITTERS)
def test_readers_see_the_earlier_rows_after_a_failed_job(committer, tmp_path):
    dest = tmp_path / "out"
    earlier(dest)

    def on_event(event: str, task: int, attempt: int) -> None:
        if event == "job_commit_started":
            raise RuntimeError("the driver gives up")

    with pytest.raises(RuntimeError, match="gives up"):
        append_new(dest, committer, on_event)
    check(counts(dest), EARLIER.num_rows, running=False)


def test_an_attempts_files_are_named_in_flight_until_the_job_commit(tmp_path):
    """No data glob matches an attempt's file; the job commit gives it its own name."""
    dest = tmp_path / "out"
    seen: list[str] = []

    def on_event(event: str, task: int, attempt: int) -> None:
        if event == "job_commit_started":
            seen.extend(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())

    dataferry.write_dataset(NEW, dest, partition_by=["day"], tasks=2, on_event=on_event)
    data = [p for p in seen if not p.endswith(".json")]
    assert data and all(p.endswith(".inflight") for p in data), data
    published = sorted(str(p.relative_to(dest)) for p in dest.rglob("*.parquet"))
    assert len(published) == len(data) and not list(dest.rglob("*.inflight"))


def test_hadoops_json_success_is_there_when_asked_for(tmp_path):
    import json

    dest = tmp_path / "out"
    dataferry.write_dataset(
        NEW, dest, partition_by=["day"], committer_options={"success_data": True}
    )
    record = json.loads((dest / "_SUCCESS").read_bytes())
    assert record["name"].endswith("SuccessData/1") and record["success"] is True


def test_hives_staged_files_are_not_counted_before_its_load(tmp_path):
    """hive's inner commit stages the files in the table's hidden staging directory; they keep
    their in-flight names until the load moves them in, so a driver that dies between the two
    leaves nothing a reader counts."""
    from dataferry.store import FaultRule, Op, fault_layer, open_store

    dest, frozen = tmp_path / "out", tmp_path / "frozen"
    earlier(dest)
    store = open_store(str(dest), faults=[])

    def freeze(index: int, op: Op, path: str) -> None:
        if not frozen.exists():
            shutil.copytree(dest, frozen)

    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            when="before",
            kinds=frozenset({Op.RENAME}),
            path_glob=".hive-staging*/-ext-10000/day=*",  # the load's first move into the table
            callback=freeze,
        )
    )
    dataferry.write_dataset(NEW, store, partition_by=["day"], committer="hive", mode="append")
    assert frozen.exists()
    check(counts(frozen), EARLIER.num_rows, running=True)
    check(counts(dest), EARLIER.num_rows + NEW.num_rows, running=False)
