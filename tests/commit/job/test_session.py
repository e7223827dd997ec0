"""The public job session (`dataferry.open_job`) is enough to write an engine: a tiny engine
below, written only against it (threads or a process pool, every attempt pickled on its way
to a worker and back), keeps the committer contract through several committers.

Each test says what a user of such an engine would see if the session broke its promise.
"""

from __future__ import annotations

import io
import pickle
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataferry
from dataferry.commit.records.drivers import driver_crashed, driver_path
from dataferry.errors import ConfigError, InjectedCrash, TaskCommitError
from dataferry.store import open_store

from ..helpers import visible

TASKS = 3
ROWS = 4


# --- the third-party engine: public names only ---------------------------------------------------


def task_rows(task: int) -> list[int]:
    return [task * 100 + k for k in range(ROWS)]


def write_attempt(attempt: Any, die: bool = False) -> Any:
    """Phase 1, on a worker: set the attempt up and write its one Parquet file."""
    attempt.setup()
    table = pa.table(
        {"id": task_rows(attempt.task_index), "attempt": [attempt.attempt_number] * ROWS}
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    attempt.write(f"part-{attempt.task_index:03d}.parquet", buf.getvalue())
    if die:
        raise RuntimeError(f"attempt {attempt.attempt_number} died after writing")
    return attempt


def commit_attempt(attempt: Any) -> Any:
    """Phase 2, on a worker, once the driver's coordinator said yes."""
    return attempt.commit()


def abort_attempt(attempt: Any) -> None:
    attempt.abort()


@dataclass
class TinyEngine:
    """Runs each task's attempts on `pool`; `dies`: attempts that die after writing (the
    engine retries them); `speculate`: tasks that get a second, concurrent attempt, which
    reaches the coordinator first."""

    pool: Executor
    dies: frozenset[tuple[int, int]] = frozenset()
    speculate: frozenset[int] = frozenset()

    def _on_worker(self, fn, *args):
        # what crosses to a worker is pickled, also with threads: nothing but the attempt
        args = pickle.loads(pickle.dumps(args))
        return pickle.loads(pickle.dumps(self.pool.submit(fn, *args).result()))

    def run_task(self, job: dataferry.Job, task: int) -> object | None:
        n = 0
        while True:
            launched = [n, n + 1] if task in self.speculate else [n]
            written = []
            for a in launched:
                try:
                    die = (task, a) in self.dies
                    written.append(self._on_worker(write_attempt, job.task(task, a), die))
                except RuntimeError:
                    job.attempt_failed(task, a)  # it died: no abort runs for it
            message = None
            for attempt in reversed(written):  # the speculative one answers first
                if message is None and job.can_commit(task, attempt.attempt_number):
                    message = self._on_worker(commit_attempt, attempt)
                    job.task_committed(task, attempt.attempt_number)
                else:
                    self._on_worker(abort_attempt, attempt)  # denied: it cleans up
            if message is not None:
                return message
            n = launched[-1] + 1

    def run(self, job: dataferry.Job) -> list[object]:
        return [self.run_task(job, t) for t in range(TASKS)]


# --- the destinations and what a reader sees there -----------------------------------------------


CASES = [("direct", "local"), ("manifest", "local"), ("magic", "s3"), ("delta", "local")]


def destination(kind: str, tmp: Path) -> str:
    root = str(tmp / "dest")
    return root if kind == "local" else f"sim:{kind}:{root}"


def store_of(url: str):
    return open_store(url, latency_scale=0.0) if url.startswith("sim:") else open_store(url)


def read_rows(committer: str, url: str, root: Path) -> list[tuple[int, int]]:
    """(id, attempt) of every row a reader sees."""
    if committer == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(str(root)).to_pyarrow_table()
    else:
        store = store_of(url)
        tables = [pq.read_table(io.BytesIO(store.read_bytes(p))) for p in visible(store)]
        table = pa.concat_tables(tables) if tables else pa.table({"id": [], "attempt": []})
    return sorted(zip(table["id"].to_pylist(), table["attempt"].to_pylist(), strict=True))


def expected(attempts: dict[int, int]) -> list[tuple[int, int]]:
    return sorted((r, attempts.get(t, 0)) for t in range(TASKS) for r in task_rows(t))


def no_driver_record(url: str, job: dataferry.Job) -> bool:
    return not store_of(url).exists(driver_path(job.job_uuid))


# --- the contract ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("committer", "kind"), CASES, ids=[c for c, _ in CASES])
def test_retried_and_speculative_attempts_commit_once(tmp_path, committer, kind):
    """A retried task (its first attempt died after writing) and a speculated one (two
    attempts wrote, the coordinator let one commit) each appear exactly once, from the
    attempt that committed. Broken, a user of the engine would read duplicated rows or rows
    of an attempt that never committed, and a driver record would stay behind (cleanup
    would leave the destination's debris alone, thinking the job still runs)."""
    url = destination(kind, tmp_path)
    with ThreadPoolExecutor(2) as pool:
        engine = TinyEngine(pool, dies=frozenset({(1, 0)}), speculate=frozenset({2}))
        with dataferry.open_job(url, committer=committer, mode="error") as job:
            assert not no_driver_record(url, job)  # recorded from setup on
            result = job.commit(engine.run(job))
    assert result.files == TASKS
    assert read_rows(committer, url, tmp_path / "dest") == expected({1: 1, 2: 1})
    assert job.state == "committed" and no_driver_record(url, job)


def test_a_process_pool_engine_commits_through_the_session(tmp_path):
    """The attempts run in other processes with nothing but their pickled context. Broken
    (an attempt needing the driver's objects), such an engine could not write at all."""
    url = destination("local", tmp_path)
    with ProcessPoolExecutor(2) as pool, dataferry.open_job(url, committer="manifest") as job:
        job.commit(TinyEngine(pool, dies=frozenset({(0, 0)})).run(job))
    assert read_rows("manifest", url, tmp_path / "dest") == expected({0: 1})
    assert no_driver_record(url, job)


@pytest.mark.parametrize(("committer", "kind"), CASES, ids=[c for c, _ in CASES])
def test_an_error_in_the_block_leaves_nothing_visible(tmp_path, committer, kind):
    """Tasks committed, then the engine's driver failed before the job commit: the block's
    error reaches the caller and nothing of the job is visible, its driver record gone.
    Broken, a failed job would leave partial output for readers (or a record that keeps
    cleanup away from its debris)."""
    url = destination(kind, tmp_path)
    with (
        ThreadPoolExecutor(2) as pool,
        pytest.raises(KeyError, match="engine bug"),
        dataferry.open_job(url, committer=committer) as job,
    ):
        TinyEngine(pool).run(job)
        raise KeyError("engine bug")
    assert job.state == "aborted"
    assert visible(store_of(url)) == []
    assert no_driver_record(url, job)


def test_a_message_of_a_second_committed_attempt_is_left_out(tmp_path):
    """An engine that hands the job commit the messages of two committed attempts of one
    task (a zombie it lost track of) still gets each task once: the coordinator's attempt.
    Broken, the job commit would refuse the job, or publish the task twice."""
    url = destination("local", tmp_path)
    with dataferry.open_job(url, committer="manifest") as job:
        messages = TinyEngine(ThreadPoolExecutor(1)).run(job)  # attempt 0 of every task
        zombie = write_attempt(job.task(0, 5))
        messages.append(zombie.commit())  # committed without asking the coordinator
        job.commit(messages)
    assert read_rows("manifest", url, tmp_path / "dest") == expected({})


def test_a_block_left_without_a_commit_is_aborted(tmp_path):
    """A block that ends without `job.commit` abandons the job: nothing of it is visible.
    Broken, attempts' files would be left for readers or cleanup."""
    url = destination("local", tmp_path)
    with dataferry.open_job(url, committer="direct") as job:
        TinyEngine(ThreadPoolExecutor(1)).run(job)
    assert job.state == "aborted"
    assert visible(store_of(url)) == [] and no_driver_record(url, job)


def test_an_injected_crash_propagates_without_abort(tmp_path):
    """An InjectedCrash is the driver dying: the session runs nothing for it, so the
    committed tasks' output and the driver record stay for `dataferry cleanup`, as a real
    death leaves them. Broken, the crash tests would test a driver that tidies up as it dies."""
    url = destination("local", tmp_path)
    with pytest.raises(InjectedCrash), dataferry.open_job(url, committer="manifest") as job:
        TinyEngine(ThreadPoolExecutor(1)).run(job)
        raise InjectedCrash("the driver died")
    store = store_of(url)
    try:
        assert job.state == "open"
        assert store.exists(driver_path(job.job_uuid))
    finally:
        driver_crashed(store, job.job_uuid)  # stop its heartbeat in this test process


def test_an_attempt_committing_after_the_job_ended_removes_its_output(tmp_path):
    """A straggler that commits after the job was aborted finds the job ended, removes what
    it wrote and says so. Broken, its files would appear in a destination whose job failed."""
    url = destination("local", tmp_path)
    with pytest.raises(KeyError), dataferry.open_job(url, committer="direct") as job:
        straggler = write_attempt(job.task(0, 0))
        raise KeyError("the job fails while the straggler runs")
    with pytest.raises(TaskCommitError, match="ended while the attempt ran"):
        straggler.commit()
    assert visible(store_of(url)) == []


def test_a_committer_and_committer_options_are_refused_together(tmp_path):
    """Options for a committer given with the committer itself would be silently ignored."""
    committer = dataferry.make_committer("manifest", str(tmp_path / "dest"))
    with pytest.raises(ConfigError, match="make_committer"):
        dataferry.open_job(committer, io_threads=4)
