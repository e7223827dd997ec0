"""Files follow the data, not the core count."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

import dataferry
from dataferry.dataset import sizing
from dataferry.dataset.options import WriteOptions
from dataferry.dataset.sizing import plan_tasks
from dataferry.dataset.synthetic import sales_table
from dataferry.engine import LocalEngineConfig


def rows_back(path) -> int:
    return pads.dataset(str(path), partitioning="hive").count_rows()


def test_a_thousand_rows_on_many_cores_is_one_file():
    t = pa.table({"v": list(range(1000))})
    plan = plan_tasks(t, (), WriteOptions(), workers=64)
    assert len(plan.tasks) == 1 and plan.stats["tasks"] == 1


def test_small_partitioned_data_is_one_file_per_partition(tmp_path):
    t = sales_table(20_000, days=4)  # 20 partitions
    r = dataferry.write_dataset(
        t,
        str(tmp_path / "o"),
        partition_by=["day", "region"],
        engine=LocalEngineConfig(workers=8, executor="threads"),
    )
    assert r.partitions == 20 and r.files == 20
    assert rows_back(tmp_path / "o") == 20_000


def test_many_small_batches_are_merged(tmp_path):
    batches = [pa.record_batch({"v": [i]}) for i in range(10)]
    r = dataferry.write_dataset(batches, str(tmp_path / "o"))
    assert r.files == 1 and rows_back(tmp_path / "o") == 10


def test_files_stay_under_the_target_size(tmp_path):
    rng = np.random.default_rng(0)
    t = pa.table({"v": rng.integers(0, 1 << 62, 400_000), "w": rng.random(400_000)})
    target = 512 * 1024
    r = dataferry.write_dataset(t, str(tmp_path / "o"), target_file_size=target, compression="none")
    found = list((tmp_path / "o").rglob("*.parquet"))
    assert r.files == len(found)
    # 6.4 MB of incompressible numbers: about 13 files of at most the target plus one row group
    assert 10 <= len(found) <= 20
    group = max(pq.ParquetFile(f).metadata.row_group(0).total_byte_size for f in found)
    assert all(f.stat().st_size <= target + group + 4096 for f in found)
    assert rows_back(tmp_path / "o") == 400_000


def test_tasks_follow_the_data_and_use_the_workers(monkeypatch):
    monkeypatch.setattr(sizing, "MIN_TASK_BYTES", 64 * 1024)
    big = pa.table({"k": ["a"] * 200_000, "v": np.arange(200_000)})  # 1.6 MB, one partition
    plan = plan_tasks(big, ("k",), WriteOptions(), workers=4)
    assert len(plan.tasks) == 4  # one partition, spread over the workers
    small = pa.table({"k": ["a"] * 1000, "v": np.arange(1000)})
    assert len(plan_tasks(small, ("k",), WriteOptions(), workers=4).tasks) == 1


def test_each_task_writes_one_file_per_partition_it_touches(monkeypatch):
    monkeypatch.setattr(sizing, "MIN_TASK_BYTES", 64 * 1024)
    t = sales_table(100_000, days=8)
    plan = plan_tasks(t, ("day", "region"), WriteOptions(), workers=2)
    for pieces in plan.tasks:
        dirs = [d for d, _ in pieces]
        assert len(dirs) == len(set(dirs))
    touched = sum(len(p) for p in plan.tasks)
    assert touched <= 40 + len(plan.tasks)  # a partition is split only at a task boundary


def test_explicit_tasks_cut_equal_row_ranges():
    t = pa.table({"k": ["a", "b"] * 50, "v": list(range(100))})
    plan = plan_tasks(t, ("k",), WriteOptions(), workers=1, tasks=3)
    assert [sum(p.num_rows for _, p in task) for task in plan.tasks] == [34, 34, 32]


def test_a_small_write_encodes_its_partitions_side_by_side(tmp_path, monkeypatch):
    seen = _threads_writing_partitions(monkeypatch)
    t = sales_table(20_000, days=4)  # one task (small), 20 partitions
    r = dataferry.write_dataset(
        t,
        str(tmp_path / "o"),
        partition_by=["day", "region"],
        engine=LocalEngineConfig(workers=4, executor="threads"),
    )
    assert r.run.attempts == 1 and r.files == 20
    assert len({n for n in seen if n.startswith("dataferry-encode")}) > 1
    back = pads.dataset(str(tmp_path / "o"), partitioning="hive").to_table()
    assert sorted(back.column("order_id").to_pylist()) == list(range(20_000))


def test_a_tiny_write_encodes_on_the_task_thread(tmp_path, monkeypatch):
    """A round of a few rows per partition (a small append) is written in order on the
    task's own thread: handing it to encoding threads costs more than its encoding. Broken,
    each such job starts the encoding threads again."""
    seen = _threads_writing_partitions(monkeypatch)
    t = sales_table(100, days=8)  # one task, 8 partitions of a dozen rows
    r = dataferry.write_dataset(
        t,
        str(tmp_path / "o"),
        partition_by=["day"],
        engine=LocalEngineConfig(workers=4, executor="threads"),
    )
    assert r.files == 8 and len(seen) == 1
    assert not any(n.startswith("dataferry-encode") for n in seen)
    assert rows_back(tmp_path / "o") == 100


def test_side_by_side_falls_back_to_order_when_files_must_be_evicted(tmp_path):
    t = sales_table(20_000, days=4)
    r = dataferry.write_dataset(
        t,
        str(tmp_path / "o"),
        partition_by=["day", "region"],
        max_open_files=3,
        engine=LocalEngineConfig(workers=4, executor="threads"),
    )
    assert r.files == 20
    assert rows_back(tmp_path / "o") == 20_000


def test_the_plan_splits_by_partition_on_every_worker_and_writes_the_same_files(
    tmp_path, monkeypatch
):
    """The driver's split by partition runs on row slices side by side, two per worker
    (not on one core while the others wait), and the files are those the one-thread split
    plans: the same names, each with the same rows in the same order. Broken, a write
    would be slower again, or put rows in other files than the plan says."""
    from dataferry.dataset import partition

    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 1000)
    t = sales_table(20_000, days=3)
    slices: list[int] = []
    real = partition._split_slice
    monkeypatch.setattr(
        partition, "_split_slice", lambda tb, c, o: slices.append(o) or real(tb, c, o)
    )

    def files(dest, workers):
        engine = LocalEngineConfig(workers=workers, executor="threads")
        dataferry.write_dataset(
            t,
            str(dest),
            partition_by=["day", "region"],
            tasks=3,
            engine=engine,
            basename_template="part-{i}.parquet",
        )
        return {
            str(p.relative_to(dest)): pq.read_table(p).column("order_id").to_pylist()
            for p in sorted(dest.rglob("*.parquet"))
        }

    one = files(tmp_path / "one", 1)
    assert slices == []
    two = files(tmp_path / "two", 2)
    assert slices == [0, 5_000, 10_000, 15_000]  # four slices, two per worker
    assert one == two and len(one) >= 15
    assert sorted(v for rows in two.values() for v in rows) == list(range(20_000))


def test_an_unpartitioned_write_on_every_worker_writes_every_row_once(tmp_path):
    """No partition columns: nothing to split, the rows are cut into tasks as they come, and
    every row is written once, in order, whatever the number of workers."""
    t = sales_table(20_000, days=3)
    found = {}
    for workers in (1, 2):
        dest = tmp_path / f"w{workers}"
        engine = LocalEngineConfig(workers=workers, executor="threads")
        dataferry.write_dataset(t, str(dest), tasks=3, engine=engine)
        files = sorted(dest.rglob("*.parquet"), key=lambda p: p.name)
        found[workers] = [v for f in files for v in pq.read_table(f).column("order_id").to_pylist()]
    assert found[1] == found[2] == list(range(20_000))


def test_the_tasks_of_a_job_share_its_encoding_threads(tmp_path, monkeypatch):
    """Every task of a job on threads encodes on one set of encoding threads, as many as the
    workers: a task that finishes first leaves its cores to the others' partitions, so the
    last task's files do not encode one by one on one core while the other idles. Broken
    (each task encoding on its own thread when there are as many tasks as workers), no
    partition is written on an encoding thread."""
    from dataferry.dataset import task

    seen: list[tuple[str, int]] = []
    real = task.TaskWriter.write_partition

    def spy(self, directory, rows):
        seen.append((threading.current_thread().name, self.out.task_index))
        return real(self, directory, rows)

    monkeypatch.setattr(task.TaskWriter, "write_partition", spy)
    t = sales_table(60_000, days=4)
    dataferry.write_dataset(
        t,
        str(tmp_path / "o"),
        partition_by=["day", "region"],
        tasks=3,
        engine=LocalEngineConfig(workers=2, executor="threads"),
    )
    names = {n for n, _ in seen}
    assert all(n.startswith("dataferry-encode") for n in names), names
    assert len(names) <= 2  # the job's threads, not a set per task
    tasks_by_thread = {n: {i for m, i in seen if m == n} for n in names}
    assert max(len(v) for v in tasks_by_thread.values()) > 1, tasks_by_thread
    back = pads.dataset(str(tmp_path / "o"), partitioning="hive").to_table()
    assert sorted(back.column("order_id").to_pylist()) == list(range(60_000))


def test_a_failed_task_leaves_the_shared_encoding_threads_to_its_retry(tmp_path, monkeypatch):
    """A task attempt that fails while its partitions encode on the job's shared threads
    waits for its own writes, then gives up without shutting the threads down: its retry and
    the other tasks encode on them and the job writes every row once. Broken (the failed
    task shutting the shared threads down), the retry cannot encode."""
    from dataferry.dataset import task

    real = task.TaskWriter.write_partition
    failed: list[str] = []

    def fail_once(self, directory, rows):
        if self.out.task_index == 0 and not failed:
            failed.append(directory)
            raise OSError("disk hiccup")
        return real(self, directory, rows)

    monkeypatch.setattr(task.TaskWriter, "write_partition", fail_once)
    t = sales_table(60_000, days=4)
    r = dataferry.write_dataset(
        t,
        str(tmp_path / "o"),
        partition_by=["day", "region"],
        tasks=2,
        engine=LocalEngineConfig(workers=2, executor="threads", max_attempts=2),
    )
    assert failed and r.run.failed_attempts == 1
    back = pads.dataset(str(tmp_path / "o"), partitioning="hive").to_table()
    assert sorted(back.column("order_id").to_pylist()) == list(range(60_000))


def test_the_sample_is_measured_beside_the_split(monkeypatch):
    """A large table's encoding sample (stage 2) runs on a thread of its own while the rows
    are split by partition, not after the split on the driver's thread, before any task
    can start. Broken, it runs on the driver's thread."""
    threads: list[str] = []
    real = sizing.measure

    def spy(run, *args):
        threads.append(threading.current_thread().name)
        return real(run, *args)

    monkeypatch.setattr(sizing, "measure", spy)
    monkeypatch.setattr(sizing, "SIDE_MEASURE_ROWS", 1000)
    t = sales_table(20_000, days=2)
    plan = plan_tasks(t, ("day",), WriteOptions(), workers=2)
    assert threads and threads[0].startswith("dataferry-measure"), threads
    assert plan.stats["row_bytes"] > 0 and "measure" in plan.stats["plan_s"]
    threads.clear()
    plan_tasks(t, ("day",), WriteOptions(), workers=1)  # one worker: no thread started
    assert threads == [threading.current_thread().name]


def _threads_writing_partitions(monkeypatch) -> set[str]:
    """The names of the threads that write partitions from now on (filled as they do)."""
    from dataferry.dataset import task

    seen: set[str] = set()
    real = task.TaskWriter.write_partition

    def spy(self, directory, rows):
        seen.add(threading.current_thread().name)
        return real(self, directory, rows)

    monkeypatch.setattr(task.TaskWriter, "write_partition", spy)
    return seen
