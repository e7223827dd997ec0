"""A streamed write: full-size files from a stream read once, in bounded memory.

A producer thread reads the input once and cuts it into segments; each segment is one write
task, launched when the segment opens, whose attempt takes the segment's rows as they arrive
and writes them to one open file per partition, which rolls at `target_file_size` (or
`max_rows_per_file`). Memory holds what is between the producer and the writer (the producer
waits while the writer is `max_memory // 2` behind) and the writer's own buffers.

Two forms of segment. Straight through (`handoff.HandoffSegment`, the default on an engine
whose attempts run in this process): the rows go from the producer to the writer in memory
and nothing goes to local disk; a batch is let go once written, so a task cannot be retried
(a failed attempt fails the job, which aborts and leaves nothing). Spilled (`spill.py`: on
worker processes, or with speculation or injected failures): the producer spills the rows to
local disk and every attempt (a retry, a speculative copy, one in another process) reads the
segment from its start, so it writes exactly the same rows; the committer keeps one attempt's
files, and nothing is visible before the job commits.

A segment spans as much of the stream as fills one file per partition to the target (learnt
from a sample of the first rows: the partitions it has, how much the format shrinks them),
capped at `MAX_SEGMENT_BYTES`; so a stream's files are full-size whatever its length, and a
retry redoes at most one segment. A spilled segment is deleted when its task is committed,
and the whole spill when the job ends.
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..commit.job.commit import job_ended
from ..engine.attempt import TaskOutput
from ..engine.feed import TaskFeed
from ..errors import ConfigError
from ..store import LocalStore
from .formats import encoded_size
from .handoff import HandoffSegment
from .options import MiB, WriteOptions
from .partition import NameLimits, split_by_partition
from .spill import Segment, SpillStats, remove_dead_spills, spill_name
from .task import INBOX_BYTES, write_rows, write_schema_file

MIN_SEGMENT_BYTES = 1 * MiB
MAX_SEGMENT_BYTES = 8 << 30  # spill of one task (local disk), and what one retry redoes
FILL = 0.9  # of a file's estimated worth per partition: a segment ends before files roll
CHUNK_BYTES = 4 * MiB  # of one spill chunk (at most a quarter of the producer's lead)
SAMPLE_BYTES = MIN_SEGMENT_BYTES  # of the first rows: their partitions, the format's ratio
SAMPLE_ROWS = 32_768  # of those, encoded to learn the ratio
HANDOFF_LEAD_BYTES = 4 * INBOX_BYTES  # most a straight-through producer runs ahead


@dataclass(frozen=True)
class SegmentSize:
    """How much input one segment (task) takes, and what it was learnt from."""

    nbytes: int
    partitions: int
    ratio: float  # bytes written per in-memory byte of input


def segment_size(
    sample: list[pa.RecordBatch],
    partition_by: tuple[str, ...],
    options: WriteOptions,
    limits: NameLimits | None = None,
) -> SegmentSize:
    """Bytes of input per segment: what fills one file per partition of the sample to
    `FILL` of the target size (or of `max_rows_per_file`). (It splits the sample by
    partition, so a partition value that cannot be a directory name on the destination, by
    `limits`, fails the job here, on the driver.)"""
    table = pa.Table.from_batches(sample)
    partitions = max(1, sum(1 for _ in split_by_partition(table, partition_by, limits)))
    keep = options.keep_partition_columns
    head = table.slice(0, SAMPLE_ROWS)
    data = head.drop_columns(list(partition_by)) if partition_by and not keep else head
    ratio = max(encoded_size(data, options) / head.nbytes, 1e-3) if head.nbytes else 1.0
    file_bytes = options.target_file_size / ratio
    if options.max_rows_per_file and table.num_rows:
        file_bytes = min(file_bytes, options.max_rows_per_file * table.nbytes / table.num_rows)
    span = FILL * partitions * file_bytes
    return SegmentSize(
        int(min(MAX_SEGMENT_BYTES, max(MIN_SEGMENT_BYTES, span))), partitions, round(ratio, 3)
    )


def segment_task(
    schema: pa.Schema,
    partition_by: tuple[str, ...],
    options: WriteOptions,
    segment: Segment | HandoffSegment,
    threads: int,
    out: TaskOutput,
) -> dict[str, Any]:
    """The work of one segment's task attempt: write its rows as they are spilled (and stop
    if the job ends meanwhile: an interrupted or failed job does not wait for its input)."""
    rows = segment.read(lambda: job_ended(out.ctx.job))
    return write_rows(out, schema, partition_by, options, rows, threads)


class StreamFeeder:
    """Reads the input on a thread, spills it, and feeds one task per segment to the engine.

    concurrent: the engine's workers (a segment's task encodes partitions on as many
    threads). spill_dir: where the spill goes (default: the system's temporary directory,
    as `tempfile` finds it: TMPDIR). schema_file: a stream without rows is written as one
    file holding its schema (`task.write_schema_file`), not as no file at all.
    """

    def __init__(
        self,
        batches: Iterator[pa.RecordBatch],
        schema: pa.Schema,
        partition_by: tuple[str, ...],
        options: WriteOptions,
        concurrent: int,
        limits: NameLimits | None = None,
        spill_dir: str | None = None,
        schema_file: bool = False,
        replayable: bool = True,
    ) -> None:
        self.schema = schema
        self.replayable = replayable
        self.schema_file = schema_file
        self.partition_by = partition_by
        self.options = options
        self.concurrent = max(1, concurrent)
        self.limits = limits  # of partition directory names on the destination
        self.feed = TaskFeed()
        # the producer's lead over the writer: rows read, spilled and not yet written; rows
        # handed straight through are in memory, and a few of the writer's rounds of input
        # keep it busy (more would only add to the peak)
        self.lead_limit = max(1, options.max_memory // 2)
        if not replayable:
            self.lead_limit = min(self.lead_limit, HANDOFF_LEAD_BYTES)
        self.chunk_bytes = max(1, min(CHUNK_BYTES, self.lead_limit // 4))
        self.sample_bytes = max(1, min(SAMPLE_BYTES, options.max_memory // 4))
        root = spill_dir or tempfile.gettempdir()
        if replayable:
            remove_dead_spills(root)  # what killed drivers left behind
        self.store = LocalStore(os.path.join(root, spill_name()))  # (made when first spilled)
        self.spill = SpillStats()
        self.segments: list[Segment | HandoffSegment] = []
        self.size: SegmentSize | None = None
        self.peak_lead = 0
        self.waits = 0
        self.wait_s = 0.0
        self._live: dict[int, Segment | HandoffSegment] = {}  # segments not yet committed
        self._cond = threading.Condition()
        self._batches = batches
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dataferry-stream", daemon=True)

    def start(self) -> TaskFeed:
        self._thread.start()
        return self.feed

    def on_event(self, event: str, task: int, attempt: int) -> None:
        """The engine's events: a committed task's spilled rows are no longer needed."""
        if event == "task_committed" and 0 <= task < len(self.segments):
            with self._cond:
                segment = self._live.pop(task, None)
                self._cond.notify_all()
            if segment is not None:
                segment.remove()

    def stop(self) -> None:
        """The job ended: stop reading, delete the spill."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=5)
        with self._cond:
            self._live.clear()
        # (an attempt still reading finds its segment gone, and fails)
        if self.replayable:
            self.store.delete("", recursive=True)

    def stats(self) -> dict[str, Any]:
        size = self.size
        return {
            "segments": len(self.segments),
            "spilled": self.replayable,
            "segment_bytes": size.nbytes if size else 0,
            "sample_partitions": size.partitions if size else 0,
            "encoded_ratio": size.ratio if size else 0.0,
            "max_memory": self.options.max_memory,
            "peak_bytes_held": self.peak_lead,
            "producer_waits": self.waits,
            "producer_wait_s": round(self.wait_s, 3),
            **self.spill.as_dict(),
        }

    # --- the producer --------------------------------------------------------------------------

    def _lead(self) -> tuple[int, int]:
        """(bytes taken from the input and not yet read by a writer, of them published); of
        segments read in this process (a worker process's reading is not seen here: its
        segment waits on disk)."""
        live = [s for s in self._live.values() if not s.remote]
        return (
            sum(s.nbytes - s.progress for s in live),
            sum(max(0, s.published - s.progress) for s in live),
        )

    def _wait_for_room(self, n: int) -> None:
        """Back-pressure: wait while the writers are `lead_limit` behind (a batch passes at
        once when they have read all that is published, however large it is)."""
        with self._cond:
            lead, readable = self._lead()
            if lead + n <= self.lead_limit or not readable:
                return
            self.waits += 1
            t = time.perf_counter()
            while not self._stop.is_set():
                self._cond.wait(0.1)
                lead, readable = self._lead()
                if lead + n <= self.lead_limit or not readable:
                    break
            self.wait_s += time.perf_counter() - t

    def _wait_for_segment_room(self) -> None:
        """At most one segment open beside one per worker still being written or committed
        (the spill on disk is bounded by them)."""
        with self._cond:
            if len(self._live) <= self.concurrent:
                return
            self.waits += 1
            t = time.perf_counter()
            while len(self._live) > self.concurrent and not self._stop.is_set():
                self._cond.wait(0.1)
            self.wait_s += time.perf_counter() - t

    def _run(self) -> None:
        segment: Segment | HandoffSegment | None = None
        sample: list[pa.RecordBatch] = []
        sampled = 0
        try:
            for batch in self._batches:
                if self._stop.is_set():
                    break
                if not isinstance(batch, pa.RecordBatch):
                    batch = pa.record_batch(batch)
                if batch.num_rows == 0:
                    continue
                self._wait_for_room(batch.nbytes)
                if self._stop.is_set():
                    break
                if segment is None:
                    segment = self._open_segment()
                if self.size is None:
                    sample.append(batch)
                    sampled += batch.nbytes
                    if sampled >= self.sample_bytes:
                        self._measure(sample)
                        sample = []
                segment.add(batch)
                with self._cond:
                    self.peak_lead = max(self.peak_lead, self._lead()[0])
                if self.size is not None and segment.nbytes >= self.size.nbytes:
                    segment.close()
                    segment = None
            if self._stop.is_set():  # the job ended: its spill is being deleted
                self.feed.close()
                return
            if self.size is None and sample:
                self._measure(sample)
            if segment is not None:
                segment.close()
            if not self.segments and self.schema_file:  # no rows: one file of the schema
                self.feed.put(
                    functools.partial(write_schema_file, schema=self.schema, options=self.options)
                )
            self.feed.close()
        except BaseException as e:
            # the feed first: the driver then fails the job with `e` before it can retry an
            # attempt that meets the segment's failure
            self.feed.close(e)
            if segment is not None and not self._stop.is_set():
                try:
                    why = f"the input failed: {type(e).__name__}: {e}"
                    segment.close(why, bad_input=isinstance(e, ConfigError))
                except Exception:
                    pass

    def _measure(self, sample: list[pa.RecordBatch]) -> None:
        self.size = segment_size(sample, self.partition_by, self.options, self.limits)

    def _open_segment(self) -> Segment | HandoffSegment:
        self._wait_for_segment_room()
        index = len(self.segments)
        segment: Segment | HandoffSegment
        if self.replayable:
            segment = Segment(self.store, index, self.chunk_bytes, self._cond, self.spill)
        else:
            segment = HandoffSegment(index, self._cond, self.spill)
        segment.open()
        with self._cond:
            self.segments.append(segment)
            self._live[segment.index] = segment
        self.feed.put(
            functools.partial(
                segment_task,
                self.schema,
                self.partition_by,
                self.options,
                segment,
                self.concurrent,
            )
        )
        return segment
