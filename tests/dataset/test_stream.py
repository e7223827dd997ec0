"""A stream is written as it arrives, in bounded memory, and retried from what it kept."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads

import dataferry
from dataferry.engine import AttemptFailure, LocalEngineConfig

MiB = 1 << 20


def batch(i: int, rows: int = 65_536) -> pa.RecordBatch:
    rng = np.random.default_rng(i)
    return pa.record_batch(
        {
            "k": pa.array(np.array(["a", "b", "c", "d"])[rng.integers(0, 4, rows)]),
            "id": np.arange(i * rows, (i + 1) * rows, dtype=np.int64),
            "x": rng.random(rows),
        }
    )  # about 1.3 MiB in memory


def ids_back(path) -> list[int]:
    t = pads.dataset(str(path), partitioning="hive").to_table(columns=["id"])
    return sorted(t.column("id").to_pylist())


def test_memory_stays_bounded_on_a_stream_many_times_the_limit(tmp_path):
    limit = 4 * MiB
    n = 40  # about 52 MiB of input
    seen: list[int] = []
    base = pa.total_allocated_bytes()

    def gen():
        for i in range(n):
            seen.append(pa.total_allocated_bytes() - base)
            yield batch(i)

    r = dataferry.write_dataset(gen(), str(tmp_path / "o"), partition_by=["k"], max_memory=limit)
    assert r.rows == n * 65_536
    assert ids_back(tmp_path / "o") == list(range(n * 65_536))
    assert r.stats["peak_bytes_held"] <= limit + 2 * MiB  # one batch may pass the line
    assert r.stats["producer_waits"] > 0  # the producer was held back
    # what Arrow allocated while the stream ran: the held windows and what is being written,
    # never the stream (without back-pressure this grows to the whole input)
    assert max(seen) < 4 * limit, [s // MiB for s in seen]


def test_rows_are_written_while_the_stream_is_still_arriving(tmp_path):
    dest = tmp_path / "o"
    written_before_end: list[int] = []

    def gen():
        for i in range(24):  # 31 MiB: a few of the task's rounds of splitting and writing
            yield batch(i)
        # (files in flight are written under a hidden name and renamed into place when closed)
        sizes = [p.stat().st_size for p in dest.rglob("*") if p.is_file()] if dest.exists() else []
        written_before_end.append(sum(sizes))
        yield batch(24)

    dataferry.write_dataset(gen(), str(dest), committer="v1")
    assert written_before_end[0] > 0  # task files had bytes before the last batch came


def test_a_failed_attempt_is_retried_from_the_rows_its_window_kept(tmp_path):
    engine = LocalEngineConfig(
        workers=2,
        executor="threads",
        failures=(AttemptFailure(task=0), AttemptFailure(task=1, when="during_commit")),
    )
    r = dataferry.write_dataset(
        (batch(i, 20_000) for i in range(20)),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_memory=2 * MiB,
        engine=engine,
    )
    assert r.run.failed_attempts == 2 and r.stats["windows"] > 2
    assert ids_back(tmp_path / "o") == list(range(20 * 20_000))


def test_a_stream_on_worker_processes(tmp_path):
    r = dataferry.write_dataset(
        (batch(i, 20_000) for i in range(8)),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_memory=2 * MiB,
        engine=LocalEngineConfig(workers=2, executor="processes"),
    )
    assert r.stats["windows"] > 1
    assert ids_back(tmp_path / "o") == list(range(8 * 20_000))


def test_an_empty_stream_commits_an_empty_job(tmp_path):
    reader = pa.RecordBatchReader.from_batches(batch(0).schema, iter(()))
    r = dataferry.write_dataset(reader, str(tmp_path / "o"), partition_by=["k"])
    assert r.rows == 0 and r.files == 0
    assert (tmp_path / "o" / "_SUCCESS").exists()
