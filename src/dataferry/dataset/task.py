"""One write task: rows in, Hive-partitioned files out, written as the rows arrive.

A task keeps one open file per partition it touches. Rows arriving are split by partition a
few MiB at a time (`INBOX_BYTES`), and the split rows are held until a round of
`ROUND_BYTES` is gathered: then each partition's share goes into its file as one row group
(after buffering up to `min_rows_per_group`). A file is closed and the next rows of its
partition go to a new one when it reaches `max_rows_per_file` rows or `target_file_size`
bytes, and the least recently written file is closed when a new one would pass
`max_open_files`. So a task writes at most one file per partition unless a file would pass
its limits, and holds at most one round of rows in its buffers.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, Executor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import pyarrow as pa

from ..engine.attempt import TaskOutput
from ..store import paths
from .formats import FileWriter, choose_dictionary, open_writer
from .options import WriteOptions
from .partition import name_limits, split_by_partition
from .rows import Rows, gather_pieces

# bytes of input split by partition at once (one split of many small batches costs a third
# less than one per batch; the split copies them once)
INBOX_BYTES = 4 << 20
# bytes of split rows held before each partition's share is written, as one row group: a
# Parquet writer keeps about 4 KiB of metadata per row group of an open file until it closes,
# and encodes small row groups more slowly (40 partitions of a round of 4 MiB make row groups
# of 2,000 rows: 2 GiB of stream then held 50 MiB of metadata alone; 16 MiB rounds, 13 MiB)
ROUND_BYTES = 16 << 20
# a round smaller than this is written on the task's own thread: its encoding takes less than
# starting the encoding threads and handing them its partitions (a small append's ~0.3 ms a file)
SMALL_ROUND_BYTES = 256 << 10
# bytes a file's writer gathers in Arrow's memory before they reach the store's stream: a
# Parquet writer writes each page and page header as it is done, and each write to a Python
# stream takes the GIL (from a thread the producer's own Python work is holding it on); 64
# KiB per open file makes those calls ten times fewer or more (40 open files: 2.5 MiB)
SINK_BUFFER_BYTES = 64 << 10


class _CountingSink:
    """The file stream, counting the bytes written to it (the rolling size)."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.bytes = 0

    def write(self, data: Any) -> int:
        n = len(memoryview(data))
        self.inner.write(data)
        self.bytes += n
        return n

    def flush(self) -> None:
        self.inner.flush()

    def tell(self) -> int:
        return self.bytes

    @property
    def closed(self) -> bool:
        return self.inner.closed

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.inner.close()


@dataclass
class _OpenFile:
    sink: _CountingSink
    stream: pa.BufferedOutputStream  # over `sink`: what the writer writes to
    writer: FileWriter
    rows: int = 0
    # the committer's columns added before the data's (None: the rows as they are)
    prepend: Callable[[pa.Table, int], pa.Table] | None = None


@dataclass
class _Partition:
    directory: str
    files: int = 0  # files opened so far (the next file's number)
    pending: list[pa.Table] = field(default_factory=list)
    pending_rows: int = 0


@dataclass
class TaskStats:
    """What a task wrote."""

    rows: int = 0
    files: int = 0
    bytes: int = 0
    row_groups: int = 0
    partitions: set[str] = field(default_factory=set)
    # thread-seconds in the format writer (encode, compress, write), and splitting rows by
    # partition and gathering them
    encode_s: float = 0.0
    split_s: float = 0.0

    def as_result(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "files": self.files,
            "bytes": self.bytes,
            "partitions": sorted(self.partitions),
            "encode_s": round(self.encode_s, 4),
            "split_s": round(self.split_s, 4),
        }


class TaskWriter:
    """Writes one task attempt's rows through its `TaskOutput`."""

    def __init__(
        self,
        out: TaskOutput,
        schema: pa.Schema,
        partition_by: tuple[str, ...],
        options: WriteOptions,
        threads: int = 1,
        pool: Executor | None = None,
    ) -> None:
        """`threads` > 1: the task's own encoding threads; `pool`: threads shared with the
        job's other tasks instead (the task neither starts nor shuts them down)."""
        self.out = out
        self.partition_by = partition_by
        self.options = options
        keep = options.keep_partition_columns
        self.file_schema = pa.schema(
            [f for f in schema if keep or f.name not in partition_by], metadata=schema.metadata
        )
        self.stats = TaskStats()
        # what the destination can hold as directory names: a partition value that passes
        # them is a ConfigError, which engines do not retry (every attempt would fail alike)
        self.limits = name_limits(out.ctx.job.store)
        self._partitions: dict[str, _Partition] = {}
        self._open: OrderedDict[str, _OpenFile] = OrderedDict()  # least recently written first
        self._inbox: list[pa.Table] = []  # rows received, not yet split
        self._inbox_bytes = 0
        self._round: list[tuple[str, pa.Table]] = []  # rows split, not yet written
        self._round_bytes = 0
        self._lock = threading.Lock()  # the task's counts, when partitions write side by side
        self._owns_pool = pool is None and threads > 1
        self._pool = ThreadPoolExecutor(threads, "dataferry-encode") if self._owns_pool else pool
        self._encoding_chosen = False
        self._announced: set[str] = set()  # partitions whose first file was named ahead

    # --- input ---------------------------------------------------------------------------------

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Rows of any partitions (split here by the partition columns). Batches are taken a
        few MiB at a time: one split and one write per partition for many small batches
        costs a third less than one per batch, and makes larger row groups."""
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if table.num_rows == 0:
            return
        self._inbox.append(table)
        self._inbox_bytes += table.nbytes
        if self._inbox_bytes >= min(INBOX_BYTES, self.options.max_memory // 8):
            self._split_inbox()

    def _split_inbox(self) -> None:
        if not self._inbox:
            return
        table = self._inbox[0] if len(self._inbox) == 1 else pa.concat_tables(self._inbox)
        self._inbox, self._inbox_bytes = [], 0
        nbytes = table.nbytes
        started = time.perf_counter()
        pieces = list(
            split_by_partition(
                table,
                self.partition_by,
                self.limits,
                self.options.keep_partition_columns,
                self.options.keep_empty_partition_values,
            )
        )
        del table  # (its rows are in `pieces`, copied in partition order)
        self.stats.split_s += time.perf_counter() - started
        self._round.extend(pieces)
        self._round_bytes += nbytes
        if self._round_bytes >= min(ROUND_BYTES, self.options.max_memory // 8):
            self._write_held()

    def _write_held(self) -> None:
        pieces, self._round, self._round_bytes = self._round, [], 0
        if pieces:
            self.write_round(pieces)

    def write_round(self, pieces: list[tuple[str, pa.Table]]) -> None:
        """Rows of several partitions, each partition's pieces written together (zero-copy,
        one row group): side by side on the task's threads (pyarrow encodes without the GIL)
        when every partition can keep its file open and the round is not small, else in
        order."""
        if not self._encoding_chosen:
            # the encodings suit the data: chosen once, from the task's first rows
            self.options = choose_dictionary(self.options, [rows for _, rows in pieces])
            self._encoding_chosen = True
        groups: dict[str, list[pa.Table]] = {}
        for directory, rows in pieces:
            groups.setdefault(directory, []).append(rows)
        del pieces
        self.announce(d for d in groups if d not in self._partitions)  # the round's new ones
        new = sum(1 for d in groups if d not in self._open)
        if (
            self._pool is None
            or len(groups) < 2
            or sum(t.nbytes for g in groups.values() for t in g) < SMALL_ROUND_BYTES
            or len(self._open) + new > self.options.max_open_files
        ):
            for directory in list(groups):
                self.write_partition(directory, _joined(groups.pop(directory)))
            return
        # each partition on one thread; no file is evicted (there is room for all)
        futures = [
            self._pool.submit(self.write_partition, d, _joined(rows)) for d, rows in groups.items()
        ]
        del groups
        # none of this task's writes still runs when it returns (a shared pool is not shut
        # down with the task): on a failure, those not started are dropped, the rest awaited
        failed = wait(futures, return_when=FIRST_EXCEPTION).not_done
        for f in failed:
            f.cancel()
        wait(futures)
        for f in futures:
            if not f.cancelled():
                f.result()  # raise the first failure here

    def write_partition(self, directory: str, rows: pa.Table) -> None:
        """Rows of one partition, without its partition columns."""
        if rows.num_rows == 0:
            return
        with self._lock:
            part = self._partitions.get(directory)
            if part is None:
                part = self._partitions[directory] = _Partition(directory)
            self.stats.rows += rows.num_rows
            self.stats.partitions.add(directory)
        part.pending.append(rows)
        part.pending_rows += rows.num_rows
        if part.pending_rows >= max(1, self.options.min_rows_per_group):
            self._flush(part)

    def write_empty(self) -> None:
        """Open the file of the root directory with no rows: a file holding only the schema
        (the one file of a write without rows)."""
        part = self._partitions.setdefault("", _Partition(""))
        self._file_for(part)

    def close(self) -> dict[str, Any]:
        """Write what is buffered, close every file; the task's result."""
        self._split_inbox()
        self._write_held()
        for part in self._partitions.values():
            self._flush(part)
        for directory in list(self._open):
            self._close_file(directory)
        self._shutdown()
        return self.stats.as_result()

    def _shutdown(self) -> None:
        if self._pool is not None and self._owns_pool:
            self._pool.shutdown(wait=True)
        self._pool = None

    def abandon(self) -> None:
        """Close the streams of a failed task without finishing its files."""
        self._shutdown()
        failed = RuntimeError("the task failed")
        for f in list(self._open.values()):
            try:  # the writer ends into the stream that is then discarded, so that it does
                f.writer.close()  # not end later, from the garbage collector, into a closed one
            except Exception:
                pass
            try:  # its buffer goes to the store's stream now, not later into a closed one
                f.stream.detach()
            except Exception:
                pass
            try:
                exit_ = getattr(f.sink.inner, "__exit__", None)
                if exit_ is not None:  # a stream that publishes on close publishes nothing
                    exit_(RuntimeError, failed, None)
                else:
                    f.sink.close()
            except Exception:
                pass
        self._open.clear()

    def announce(self, directories: Iterable[str]) -> None:
        """Name each partition's first file before it is written, once (committers that
        record a file before it exists do it for all of them at once: on an engine, where a
        task splits its own rows, for each round's new partitions; one batch of markers per
        round, not one marker each)."""
        fresh = [d for d in dict.fromkeys(directories) if d not in self._announced]
        if not fresh:
            return
        self._announced.update(fresh)
        t, u = self.out.task_index, self.out.job_uuid
        self.out.announce([paths.join(d, self.options.file_name(t, u, 0)) for d in fresh])

    # --- files ---------------------------------------------------------------------------------

    def _flush(self, part: _Partition) -> None:
        if not part.pending:
            return
        rows = part.pending[0] if len(part.pending) == 1 else pa.concat_tables(part.pending)
        part.pending, part.pending_rows = [], 0
        limit = self.options.max_rows_per_file
        while rows.num_rows:
            f = self._file_for(part)
            take = rows.num_rows if not limit else min(rows.num_rows, limit - f.rows)
            piece = rows.slice(0, take)
            started = time.perf_counter()
            f.writer.write(piece if f.prepend is None else f.prepend(piece, f.rows))
            encode_s = time.perf_counter() - started
            f.rows += take
            with self._lock:
                self.stats.encode_s += encode_s
                self.stats.row_groups += -(-take // self.options.max_rows_per_group)
                self._open.move_to_end(part.directory)
            rows = rows.slice(take)
            if (limit and f.rows >= limit) or f.stream.tell() >= self.options.target_file_size:
                self._close_file(part.directory)

    def _file_for(self, part: _Partition) -> _OpenFile:
        f = self._open.get(part.directory)
        if f is not None:
            return f
        while len(self._open) >= self.options.max_open_files:  # never in a parallel round
            self._close_file(next(iter(self._open)))
        name = self.options.file_name(self.out.task_index, self.out.job_uuid, part.files)
        part.files += 1
        relpath = paths.join(part.directory, name)
        # the committer's own columns (Hudi's meta columns), if its files hold any
        extra = self.out.committer.file_columns(self.out.ctx, relpath, self.file_schema)
        schema = self.file_schema if extra is None else extra.schema
        sink = _CountingSink(self.out.open(relpath))
        try:
            stream = pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), SINK_BUFFER_BYTES)
            writer = open_writer(stream, schema, self.options)  # type: ignore[arg-type]
        except BaseException:
            sink.close()
            raise
        f = _OpenFile(sink, stream, writer, prepend=None if extra is None else extra.prepend)
        with self._lock:
            self._open[part.directory] = f
        return f

    def _close_file(self, directory: str) -> None:
        with self._lock:
            f = self._open.pop(directory)
        started = time.perf_counter()
        f.writer.close()
        f.stream.close()  # (the last bytes to the store's stream, which it closes)
        encode_s = time.perf_counter() - started
        with self._lock:
            self.stats.encode_s += encode_s
            self.stats.files += 1
            self.stats.bytes += f.sink.bytes


def _joined(tables: list[pa.Table]) -> pa.Table:
    """One table of a partition's pieces (their chunks side by side, nothing copied)."""
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables)


def write_rows(
    out: TaskOutput,
    schema: pa.Schema,
    partition_by: tuple[str, ...],
    options: WriteOptions,
    batches: Iterable[pa.Table | pa.RecordBatch],
    threads: int = 1,
) -> dict[str, Any]:
    """A task's whole work over rows of any partitions, read as they come (partitions
    encoded side by side on `threads` threads)."""
    writer = TaskWriter(out, schema, partition_by, options, threads)
    try:
        for batch in batches:
            writer.write(batch)
        return writer.close()
    except BaseException:
        writer.abandon()
        raise


def write_pieces(
    out: TaskOutput,
    schema: pa.Schema,
    partition_by: tuple[str, ...],
    options: WriteOptions,
    pieces: Iterable[tuple[str, pa.Table | Rows]],
    threads: int = 1,
    pool: Executor | None = None,
) -> dict[str, Any]:
    """A task's whole work over rows already split by partition (a planned in-memory write):
    each (directory, rows) goes straight to its partition's file (encoded on `pool`, the
    job's encoding threads, when given; else on `threads` of the task's own)."""
    started = time.perf_counter()
    pieces = gather_pieces(list(pieces))
    writer = TaskWriter(out, schema, partition_by, options, threads, pool)
    writer.stats.split_s = time.perf_counter() - started
    writer.announce(dict.fromkeys(d for d, _ in pieces))
    try:
        writer.write_round(pieces)
        return writer.close()
    except BaseException:
        writer.abandon()
        raise


def write_schema_file(out: TaskOutput, schema: pa.Schema, options: WriteOptions) -> dict[str, Any]:
    """The one task of a write without rows: one file at the destination's root holding the
    data's schema (every column, the partition columns too: there is no `col=value`
    directory to hold them) and no rows, as `pandas.DataFrame.to_parquet` writes an empty
    frame, so that readers of the data set find its columns."""
    writer = TaskWriter(out, schema, (), options)
    writer.announce([""])
    try:
        writer.write_empty()
        return writer.close()
    except BaseException:
        writer.abandon()
        raise
