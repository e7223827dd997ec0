"""A stream is written as it arrives, in bounded memory, in full-size files: straight through
on threads (nothing spilled), and retried exactly from its spill where attempts repeat."""

from __future__ import annotations

import tempfile
import tracemalloc

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

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


def in_arrow_memory(b: pa.RecordBatch) -> pa.RecordBatch:
    """The batch copied into Arrow's pool (numpy's arrays are wrapped, not counted there)."""
    return pa.RecordBatch.from_arrays([pa.concat_arrays([c]) for c in b.columns], schema=b.schema)


def test_memory_stays_bounded_on_a_stream_many_times_the_limit(tmp_path):
    limit = 4 * MiB
    n = 40  # about 52 MiB of input
    seen: list[int] = []
    tracemalloc.start()  # Python's own allocations (a spill chunk read back is bytes)
    base = pa.total_allocated_bytes() + tracemalloc.get_traced_memory()[0]

    def gen():
        for i in range(n):
            held = pa.total_allocated_bytes() + tracemalloc.get_traced_memory()[0]
            seen.append(held - base)
            yield in_arrow_memory(batch(i))

    try:
        r = dataferry.write_dataset(
            gen(), str(tmp_path / "o"), partition_by=["k"], max_memory=limit
        )
    finally:
        tracemalloc.stop()
    assert r.rows == n * 65_536 and r.files == 4  # whole partitions, not windows of memory
    assert ids_back(tmp_path / "o") == list(range(n * 65_536))
    assert r.stats["peak_bytes_held"] <= limit + 2 * MiB  # one batch may pass the line
    assert r.stats["producer_waits"] > 0  # the producer was held back
    # what Arrow and Python held while the stream ran: the rows between the producer and the
    # writer and what is being written, never the stream (without back-pressure, or with the
    # rows kept in memory for a retry, this grows to the whole input)
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


def file_sizes(path) -> dict[str, list[int]]:
    """Bytes of each data file, by partition directory."""
    sizes: dict[str, list[int]] = {}
    for f in sorted(path.rglob("*.parquet")):
        sizes.setdefault(f.parent.name, []).append(f.stat().st_size)
    return sizes


def spills(tmp) -> list:
    return [p for p in tmp.iterdir() if p.name.startswith("dataferry-spill-")]


@pytest.fixture
def spill_root(tmp_path, monkeypatch):
    """The spill's temporary directory, to see that it is removed."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_a_streams_files_hold_all_of_a_partitions_rows_whatever_max_memory(tmp_path, spill_root):
    # 16 MiB of input in 2 MiB of memory: one file per partition (below the target size), not
    # one per partition per window of memory
    r = dataferry.write_dataset(
        (batch(i, 20_000) for i in range(40)),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_memory=2 * MiB,
    )
    assert r.files == 4 and r.stats["segments"] == 1
    assert sorted(file_sizes(tmp_path / "o")) == ["k=a", "k=b", "k=c", "k=d"]
    assert ids_back(tmp_path / "o") == list(range(40 * 20_000))
    assert r.stats["peak_bytes_held"] <= 2 * MiB
    assert r.stats["spill_bytes"] == 0 and not r.stats["spilled"]  # straight through
    assert spills(spill_root) == []


def test_a_streams_files_reach_the_target_size_across_segments(tmp_path, spill_root):
    target = 256 * 1024
    r = dataferry.write_dataset(
        (batch(i, 20_000) for i in range(40)),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_memory=4 * MiB,
        target_file_size=target,
    )
    assert r.stats["segments"] > 4  # tasks of a few MiB each, one after another
    for part, sizes in file_sizes(tmp_path / "o").items():
        full = sizes[:-1] if sizes[-1] < target // 2 else sizes  # the stream's last rows
        assert len(sizes) - len(full) <= 1, (part, sizes)
        assert all(0.5 * target <= n <= 1.1 * target for n in full), (part, sizes)
    assert ids_back(tmp_path / "o") == list(range(40 * 20_000))


def spill_bytes(root) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_a_stream_is_written_straight_through_without_a_full_spill(tmp_path, spill_root):
    """On threads, a stream's rows go from the input to the open partition files in memory:
    the local spill never holds more than the memory budget (a full spill would hold the
    whole input, costing its write and read back), and files still reach the target size."""
    limit, target = 4 * MiB, 256 * 1024
    peak = [0]

    def gen():
        for i in range(40):  # about 26 MiB of input: 6x the budget
            peak[0] = max(peak[0], spill_bytes(spill_root))
            yield batch(i, 20_000)

    r = dataferry.write_dataset(
        gen(), str(tmp_path / "o"), partition_by=["k"], max_memory=limit, target_file_size=target
    )
    assert peak[0] <= limit, peak[0] // MiB
    assert r.stats["spill_bytes"] <= limit and r.stats["peak_bytes_held"] <= limit + MiB
    for part, sizes in file_sizes(tmp_path / "o").items():
        full = sizes[:-1] if sizes[-1] < target // 2 else sizes  # the stream's last rows
        assert len(sizes) - len(full) <= 1, (part, sizes)
        assert all(0.5 * target <= n <= 1.1 * target for n in full), (part, sizes)
    assert ids_back(tmp_path / "o") == list(range(40 * 20_000))


def test_max_rows_per_file_cuts_a_streams_files(tmp_path):
    r = dataferry.write_dataset(
        (batch(i, 10_000) for i in range(20)),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_rows_per_file=20_000,
    )
    rows = [pq.ParquetFile(f).metadata.num_rows for f in (tmp_path / "o").rglob("*.parquet")]
    assert r.stats["segments"] > 1 and max(rows) <= 20_000
    assert sum(n >= 10_000 for n in rows) >= len(rows) - 8  # all but a few tails at least half
    assert ids_back(tmp_path / "o") == list(range(20 * 10_000))


def test_failed_attempts_are_retried_from_the_spill_exactly(tmp_path, spill_root):
    # task 0 dies after writing its files, task 1 half way through its task commit: each
    # retry reads its segment again from the spill, and the rows come back exactly once
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
        target_file_size=128 * 1024,
        engine=engine,
    )
    assert r.run.failed_attempts == 2 and r.stats["segments"] > 2
    assert ids_back(tmp_path / "o") == list(range(20 * 20_000))
    assert r.stats["spill_read_bytes"] > 20 * 20_000 * 17  # two segments were read twice
    assert spills(spill_root) == []


def test_a_speculative_attempt_reads_the_same_rows(tmp_path):
    engine = LocalEngineConfig(workers=2, executor="threads", speculate_tasks=(0,))
    r = dataferry.write_dataset(
        (batch(i, 20_000) for i in range(10)),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_memory=2 * MiB,
        engine=engine,
    )
    assert r.run.speculative_attempts == 1
    assert ids_back(tmp_path / "o") == list(range(10 * 20_000))


def test_a_stream_on_worker_processes_follows_the_spill(tmp_path, spill_root):
    # the attempts read the spill from another process, while it is written; one of them
    # dies and its retry, in another process, reads its segment again
    r = dataferry.write_dataset(
        (batch(i, 20_000) for i in range(10)),
        str(tmp_path / "o"),
        partition_by=["k"],
        max_memory=2 * MiB,
        target_file_size=128 * 1024,
        engine=LocalEngineConfig(workers=2, executor="processes", failures=(AttemptFailure(1),)),
    )
    assert r.stats["segments"] > 1 and r.run.failed_attempts == 1
    assert ids_back(tmp_path / "o") == list(range(10 * 20_000))
    assert spills(spill_root) == []


def test_a_failing_input_fails_the_job_and_leaves_nothing(tmp_path, spill_root):
    def gen():
        for i in range(6):
            yield batch(i, 20_000)
        raise ValueError("the source broke")

    with pytest.raises(ValueError, match="the source broke"):
        dataferry.write_dataset(gen(), str(tmp_path / "o"), partition_by=["k"])
    assert not list((tmp_path / "o").rglob("*.parquet"))
    assert spills(spill_root) == []


def test_an_empty_stream_commits_one_file_of_its_schema(tmp_path):
    """A stream without rows commits one file holding its schema (as pandas writes an empty
    frame); without it, readers of the data set would find no columns."""
    reader = pa.RecordBatchReader.from_batches(batch(0).schema, iter(()))
    r = dataferry.write_dataset(reader, str(tmp_path / "o"), partition_by=["k"])
    assert r.rows == 0 and r.files == 1
    assert (tmp_path / "o" / "_SUCCESS").exists()
    read = pads.dataset(str(tmp_path / "o"), format="parquet", partitioning="hive").to_table()
    assert read.num_rows == 0 and read.schema.names == batch(0).schema.names


def test_a_straight_through_segment_refuses_a_second_reader():
    """Rows handed straight to a writer are let go once taken: a retry must fail at once,
    saying why, rather than write the segment with the rows it lost (a partial write)."""
    from dataferry.dataset.handoff import HandoffSegment
    from dataferry.errors import EngineError

    segment = HandoffSegment(0)
    segment.add(batch(0, 10))
    segment.add(batch(1, 10))
    segment.close()
    assert sum(b.num_rows for b in segment.read()) == 20
    assert segment.progress == segment.nbytes  # all let go: the producer may go on
    with pytest.raises(EngineError, match="cannot be retried"):
        segment.read()


def test_a_straight_through_producer_runs_only_a_few_rounds_ahead():
    """Rows handed straight through are held in memory (a spill's lead is on disk): with the
    producer allowed half of `max_memory` ahead, a stream's peak memory rose by that much
    (128 MiB at the default) for no gain in speed."""
    from dataferry.dataset.options import WriteOptions
    from dataferry.dataset.stream import HANDOFF_LEAD_BYTES, StreamFeeder

    options = WriteOptions(max_memory=1 << 30)
    straight = StreamFeeder(iter(()), batch(0).schema, ("k",), options, 2, replayable=False)
    spilled = StreamFeeder(iter(()), batch(0).schema, ("k",), options, 2, replayable=True)
    assert straight.lead_limit == HANDOFF_LEAD_BYTES < spilled.lead_limit == 1 << 29


def test_a_straight_through_attempt_that_fails_fails_the_job_and_leaves_nothing(
    tmp_path, monkeypatch
):
    """A task written straight through cannot be retried (its rows are gone): the job must
    fail, saying so, and abort with nothing of it visible, never commit a partial retry."""
    import dataferry.dataset.stream as stream
    from dataferry.errors import EngineError

    real, calls = stream.write_rows, []

    def breaks_after_rows(out, schema, partition_by, options, rows, threads):
        calls.append(1)
        if len(calls) > 1:  # a retry writes what it can read
            return real(out, schema, partition_by, options, rows, threads)
        taken = iter(rows)
        next(taken)  # some rows are taken and gone
        raise OSError("the disk went away")

    monkeypatch.setattr(stream, "write_rows", breaks_after_rows)
    with pytest.raises(EngineError, match="cannot be retried"):
        dataferry.write_dataset(
            (batch(i, 20_000) for i in range(6)), str(tmp_path / "o"), partition_by=["k"]
        )
    assert not list((tmp_path / "o").rglob("*.parquet"))
