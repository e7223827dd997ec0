"""A stream's spill: chunks published whole, followed by readers while written, the same rows
for every reader (in this process or, pickled, in another), and an end readers stop at."""

from __future__ import annotations

import pickle
import threading
import time

import pyarrow as pa
import pytest

from dataferry.dataset import spill
from dataferry.dataset.spill import Segment
from dataferry.errors import EngineError
from dataferry.store import LocalStore


def rows(i: int, n: int = 1000) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array(range(i * n, (i + 1) * n), pa.int64())})


def ids(batches) -> list[int]:
    return [v for b in batches for v in b.column("id").to_pylist()]


@pytest.fixture
def segment(tmp_path):
    s = Segment(LocalStore(str(tmp_path / "spill")), 0, chunk_bytes=16_000)
    s.open()
    return s


def test_readers_follow_the_chunks_and_read_the_same_rows(segment):
    got: list[list[int]] = []

    def read(reader) -> None:
        got.append(ids(reader))

    # one reader of this process (woken by the producer), one as another process has it
    readers = [
        threading.Thread(target=read, args=(r,))
        for r in (segment, pickle.loads(pickle.dumps(segment)))
    ]
    for t in readers:
        t.start()
    for i in range(10):
        segment.add(rows(i))  # 8,000 bytes each: a chunk of two
        time.sleep(0.01)
    assert segment.chunks == 5 and segment.published == segment.nbytes
    segment.close()
    for t in readers:
        t.join(5)
    assert got == [list(range(10_000))] * 2
    assert segment.remote  # sent away: the producer does not wait on that reader
    assert ids(segment) == list(range(10_000))  # a retry reads it all again


def test_a_failed_input_fails_its_readers(segment):
    segment.add(rows(0))
    segment.close("the input failed: ValueError: broken")
    with pytest.raises(EngineError, match="broken"):
        ids(segment)
    assert not segment.store.exists(segment.chunk_path(0))  # the unfinished chunk is dropped


def test_a_reader_stops_when_the_job_ends_or_the_spill_is_gone(segment, monkeypatch):
    monkeypatch.setattr(spill, "ENDED_CHECK_S", 0.05)
    segment.add(rows(0))  # not yet published: the reader waits
    with pytest.raises(EngineError, match="the job ended"):
        ids(segment.read(lambda: True))
    segment.remove()
    with pytest.raises(EngineError, match="was removed"):
        ids(segment)
    assert segment.progress == segment.nbytes  # nothing of it holds the producer back


def test_a_dead_drivers_spill_is_removed_by_the_next_stream(tmp_path):
    """A killed driver leaves its spill on local disk; the next stream into the same scratch
    directory removes it, and keeps a live process's spill."""
    import subprocess
    import sys

    import pyarrow as pa

    from dataferry.dataset.spill import SPILL_PREFIX, spill_name

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    (tmp_path / f"{SPILL_PREFIX}{pid}-1-{'a' * 32}" / "s0").mkdir(parents=True)
    live = tmp_path / spill_name()
    live.mkdir()
    (tmp_path / "dataferry-spill-notes.txt").write_text("not a spill directory")
    reader = pa.RecordBatchReader.from_batches(
        pa.schema([("k", pa.string()), ("v", pa.int64())]),
        iter([pa.record_batch({"k": ["a", "b"], "v": [1, 2]})]),
    )
    from dataferry.dataset.options import WriteOptions
    from dataferry.dataset.stream import StreamFeeder

    StreamFeeder(reader, reader.schema, ("k",), WriteOptions(), 1, spill_dir=str(tmp_path))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert f"{SPILL_PREFIX}{pid}-1-{'a' * 32}" not in left
    assert live.name in left and "dataferry-spill-notes.txt" in left
