"""A stream's rows spilled to local disk, one segment per write task.

Any attempt of a stream's task (the first, a retry, a speculative copy; in this process or in
a worker process) reads its rows from the segment, so every attempt writes exactly the same
rows in the same order, and no row of the stream has to stay in memory for a retry. The
stream itself is read once.

A segment is a directory on a local scratch store (through the Store layer): chunk files
`c<n>.arrow`, each an Arrow IPC stream of a few MiB of batches, published whole (written under
a hidden name and renamed into place when complete), and `end`, written when the segment is
closed: how many chunks it holds, or why the input failed. A reader follows the chunks as they
appear, so a task writes rows while the stream is still arriving, and stops at `end`.

The producer's side (`add`, `close`, `remove`) lives in the process that reads the input;
a segment sent to another process is only a reader.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import ConfigError, EngineError
from ..liveness import process_alive, this_process
from ..store import LocalStore, Store, paths

SPILL_PREFIX = "dataferry-spill-"  # + <pid>-<process start>-<uuid>: whose spill it is
POLL_S = 0.05  # a reader's wait for the next chunk (woken at once in the producer's process)
ENDED_CHECK_S = 1.0  # how often a reader asks whether its job has ended


def spill_name() -> str:
    """A new spill directory's name, saying which process (pid and start time) made it."""
    import uuid

    _host, pid, start = this_process()
    return f"{SPILL_PREFIX}{pid}-{start or 0}-{uuid.uuid4().hex}"


def remove_dead_spills(root: str) -> list[str]:
    """Delete the spill directories under `root` whose process has ended (a killed driver
    leaves its spill behind); the names removed. A spill of a live process is kept."""
    store = LocalStore(root)
    removed = []
    for entry in store.list_or_empty(""):
        if not entry.is_dir or entry.is_link or not entry.name.startswith(SPILL_PREFIX):
            continue
        pid, _, rest = entry.name[len(SPILL_PREFIX) :].partition("-")
        start = rest.partition("-")[0]
        if not pid.isdigit() or process_alive(int(pid), "" if start == "0" else start):
            continue
        try:
            store.delete(entry.name, recursive=True)
            removed.append(entry.name)
        except Exception:  # another process removing it too, or not ours to delete
            continue
    return removed


@dataclass
class SpillStats:
    """What spilling cost: bytes and seconds written by the producer, and read back by the
    attempts of this process (attempts in worker processes read too, uncounted here)."""

    chunks: int = 0
    bytes_in: int = 0  # in-memory bytes of the batches spilled
    bytes_written: int = 0  # bytes of the chunk files
    write_s: float = 0.0
    bytes_read: int = 0
    read_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "spill_chunks": self.chunks,
            "spill_bytes": self.bytes_written,
            "spill_write_s": round(self.write_s, 3),
            "spill_read_bytes": self.bytes_read,
            "spill_read_s": round(self.read_s, 3),
        }


class Segment:
    """The rows of one task: written once by the producer, read by every attempt.

    `nbytes` and `published` are the in-memory bytes added and published in chunks so far;
    `progress` the most any attempt of this process has read (the producer's back-pressure).
    """

    def __init__(
        self,
        store: Store,
        index: int,
        chunk_bytes: int,
        cond: threading.Condition | None = None,
        stats: SpillStats | None = None,
        compression: str | None = None,
    ) -> None:
        self.store = store
        self.index = index
        self.directory = f"s{index:06d}"
        self.chunk_bytes = max(1, chunk_bytes)
        self.compression = compression
        self.nbytes = 0
        self.rows = 0
        self.published = 0
        self.progress = 0
        self.chunks = 0
        self.closed = False
        self.remote = False  # read in another process
        self.stats = stats if stats is not None else SpillStats()
        self._cond = cond if cond is not None else threading.Condition()
        self._sink: pa.BufferOutputStream | None = None
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None
        self._pending = 0  # bytes in the chunk being written

    def chunk_path(self, n: int) -> str:
        return paths.join(self.directory, f"c{n:06d}.arrow")

    @property
    def end_path(self) -> str:
        return paths.join(self.directory, "end")

    # --- the producer --------------------------------------------------------------------------

    def open(self) -> None:
        """Create the segment's directory (a reader takes its absence for a removed spill)."""
        self.store.mkdirs(self.directory)

    def add(self, batch: pa.RecordBatch) -> None:
        """Spill one batch; a chunk is published once it holds `chunk_bytes`."""
        t = time.perf_counter()
        if self._writer is None:
            # a chunk is encoded in memory (by Arrow, without the GIL) and written in one
            # call: a Python file as the IPC sink would take the GIL for every buffer
            self._sink = pa.BufferOutputStream()
            options = pa.ipc.IpcWriteOptions(compression=self.compression)
            self._writer = pa.ipc.new_stream(self._sink, batch.schema, options=options)
        self._writer.write_batch(batch)
        self._pending += batch.nbytes
        with self._cond:
            self.nbytes += batch.nbytes
            self.rows += batch.num_rows
        self.stats.bytes_in += batch.nbytes
        if self._pending >= self.chunk_bytes:
            self._publish()
        self.stats.write_s += time.perf_counter() - t

    def _publish(self) -> None:
        assert self._writer is not None and self._sink is not None
        self._writer.close()
        data = self._sink.getvalue()
        self._writer = self._sink = None
        with self.store.open_write(self.chunk_path(self.chunks)) as f:
            f.write(data)  # renamed into place on close: readers see it whole or not at all
        size = data.size
        del data
        self.stats.chunks += 1
        self.stats.bytes_written += size
        with self._cond:
            self.chunks += 1
            self.published += self._pending
            self._pending = 0
            self._cond.notify_all()

    def close(self, failed: str | None = None, bad_input: bool = False) -> None:
        """No more rows: publish the last chunk and the end (with `failed`, the reason the
        segment is incomplete: its readers fail, with a ConfigError if `bad_input`, which
        every attempt would meet alike, so the engine does not retry them)."""
        if self.closed:
            return
        try:
            if self._writer is not None:
                if failed is None:
                    t = time.perf_counter()
                    self._publish()
                    self.stats.write_s += time.perf_counter() - t
                else:
                    self._discard_chunk()
            end = {"chunks": self.chunks, "rows": self.rows, "failed": failed, "bad": bad_input}
            self.store.write_bytes(self.end_path, json.dumps(end).encode())
        finally:
            with self._cond:
                self.closed = True
                self._cond.notify_all()

    def _discard_chunk(self) -> None:
        self._writer = self._sink = None

    def remove(self) -> None:
        """The task is committed (or the job ended): delete the spilled rows."""
        if self._writer is not None:
            self._discard_chunk()
        self.store.delete(self.directory, recursive=True)
        with self._cond:
            self.progress = self.nbytes  # nothing of it is waiting for a reader any more
            self._cond.notify_all()

    # --- the readers ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self.read()

    def read(self, ended: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
        """The segment's batches in order, waiting for chunks still to come; an EngineError
        once `ended()` says the job ended (asked about once every ENDED_CHECK_S)."""
        n = read = 0
        checked = time.monotonic()
        while True:
            if ended is not None and time.monotonic() - checked >= ENDED_CHECK_S:
                if ended():
                    raise EngineError(f"stream segment {self.index}: the job ended")
                checked = time.monotonic()
            if self.store.exists(self.chunk_path(n)):
                for batch in self._read_chunk(n):
                    read += batch.nbytes
                    self._advance(read)
                    yield batch
                n += 1
                continue
            if self.store.exists(self.end_path):
                end = json.loads(self.store.read_bytes(self.end_path))
                if end["failed"] is not None:
                    error = ConfigError if end["bad"] else EngineError
                    raise error(f"stream segment {self.index}: {end['failed']}")
                if n >= end["chunks"]:
                    return
                continue  # the chunk was published just before the end
            if not self.store.exists(self.directory):
                raise EngineError(f"stream segment {self.index} was removed (the job ended)")
            with self._cond:
                if self.chunks <= n and not self.closed:
                    self._cond.wait(POLL_S)

    def _read_chunk(self, n: int) -> Iterator[pa.RecordBatch]:
        """A chunk's batches, read one at a time (into Arrow's memory pool)."""
        t = time.perf_counter()
        with self.store.open_read(self.chunk_path(n)) as f:
            reader = pa.ipc.open_stream(f)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                self.stats.bytes_read += batch.nbytes
                self.stats.read_s += time.perf_counter() - t
                yield batch
                t = time.perf_counter()
        self.stats.read_s += time.perf_counter() - t

    def _advance(self, read: int) -> None:
        if read > self.progress:
            with self._cond:
                if read > self.progress:
                    self.progress = read
                    self._cond.notify_all()

    def __reduce__(self) -> Any:
        """Sent to another process: a reader of the same directory (whose progress this
        process does not see: `remote`, so the producer does not wait on it)."""
        with self._cond:
            self.remote = True
            self._cond.notify_all()
        return (_reader, (self.store, self.index, self.compression))


def _reader(store: Store, index: int, compression: str | None) -> Segment:
    return Segment(store, index, 1, compression=compression)
