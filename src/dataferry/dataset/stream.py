"""A streamed write: batches flow to write tasks as they arrive, in bounded memory.

A producer thread reads the input once. It cuts the batches into windows; each window is one
task, launched when its first batch arrives, that writes its rows as they come. A window keeps
its batches until its task is committed, because a retried or speculative attempt must write
the same rows again; so the rows held in memory are those of windows not yet committed, and
the producer waits (back-pressure on the input) while they would pass `max_memory`.

Windows are as large as memory allows for the tasks that run at once, and never larger than
what fills one file per partition to the target size.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..engine.attempt import TaskOutput
from ..engine.feed import TaskFeed
from ..errors import EngineError
from .formats import encoded_size
from .options import MiB, WriteOptions
from .partition import NameLimits, split_by_partition
from .task import write_rows

MIN_WINDOW_BYTES = 1 * MiB


class MemoryBudget:
    """Bytes of input held at once; `acquire` waits until there is room (or `stop`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self.waits = 0
        self.wait_s = 0.0
        self._cond = threading.Condition()

    def acquire(self, n: int, stop: threading.Event) -> None:
        with self._cond:
            if self.used and self.used + n > self.limit:
                self.waits += 1
                t = time.perf_counter()
                # a batch larger than the whole budget still passes once nothing else is held
                while self.used and self.used + n > self.limit and not stop.is_set():
                    self._cond.wait(0.1)
                self.wait_s += time.perf_counter() - t
            self.used += n
            self.peak = max(self.peak, self.used)

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()


class Window:
    """The batches of one task, readable while they arrive, kept until released."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.nbytes = 0
        self.rows = 0
        self._batches: list[pa.RecordBatch] = []
        self._closed = False
        self._failed: str | None = None
        self._released = False
        self._cond = threading.Condition()

    def add(self, batch: pa.RecordBatch) -> None:
        with self._cond:
            self._batches.append(batch)
            self.nbytes += batch.nbytes
            self.rows += batch.num_rows
            self._cond.notify_all()

    def close(self, failed: str | None = None) -> None:
        with self._cond:
            self._closed = True
            self._failed = failed
            self._cond.notify_all()

    def release(self) -> int:
        """Drop the rows (the task is committed); the bytes given back."""
        with self._cond:
            if self._released:
                return 0
            self._released = True
            self._batches = []
            return self.nbytes

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        i = 0
        while True:
            with self._cond:
                while i >= len(self._batches) and not self._closed:
                    self._cond.wait()
                if self._failed is not None:
                    raise EngineError(f"window {self.index}: {self._failed}")
                if self._released:
                    raise EngineError(f"window {self.index} was released while being read")
                if i >= len(self._batches):
                    return
                batch = self._batches[i]
            i += 1
            yield batch

    def __reduce__(self) -> Any:
        """Sent to another process: the whole window, once it is complete."""
        with self._cond:
            while not self._closed:
                self._cond.wait()
            return (_closed_window, (self.index, list(self._batches), self._failed))


def _closed_window(index: int, batches: list[pa.RecordBatch], failed: str | None) -> Window:
    w = Window(index)
    for b in batches:
        w.add(b)
    w.close(failed)
    return w


def window_task(
    schema: pa.Schema,
    partition_by: tuple[str, ...],
    options: WriteOptions,
    window: Window,
    out: TaskOutput,
) -> dict[str, Any]:
    """The work of one window's task: write its rows as they arrive."""
    return write_rows(out, schema, partition_by, options, window)


def window_size(
    first: pa.RecordBatch,
    partition_by: tuple[str, ...],
    options: WriteOptions,
    concurrent: int,
    limits: NameLimits | None = None,
) -> int:
    """Bytes of input per window: the memory budget shared by the windows being written and
    the one filling, capped at what makes one target-sized file per partition. (It splits
    the first batch by partition, so a partition value that cannot be a directory name on
    the destination, by `limits`, fails the job here, on the driver.)"""
    share = options.max_memory // (max(1, concurrent) + 1)
    table = pa.Table.from_batches([first])
    partitions = max(1, sum(1 for _ in split_by_partition(table, partition_by, limits)))
    keep = options.keep_partition_columns
    data = table.drop_columns(list(partition_by)) if partition_by and not keep else table
    ratio = encoded_size(data, options) / data.nbytes if data.nbytes else 1.0
    full_files = partitions * options.target_file_size / max(ratio, 1e-3)
    return int(max(MIN_WINDOW_BYTES, min(share, full_files)))


class StreamFeeder:
    """Reads the input on a thread and feeds one task per window to the engine."""

    def __init__(
        self,
        batches: Iterator[pa.RecordBatch],
        schema: pa.Schema,
        partition_by: tuple[str, ...],
        options: WriteOptions,
        concurrent: int,
        publish_open: bool,
        limits: NameLimits | None = None,
    ) -> None:
        self.schema = schema
        self.partition_by = partition_by
        self.options = options
        self.concurrent = concurrent
        self.limits = limits  # of partition directory names on the destination
        self.publish_open = publish_open  # tasks share this process's memory: start early
        self.feed = TaskFeed()
        self.budget = MemoryBudget(options.max_memory)
        self.windows: list[Window] = []
        self.window_bytes = 0
        self._batches = batches
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="dataferry-stream", daemon=True)

    def start(self) -> TaskFeed:
        self._thread.start()
        return self.feed

    def on_event(self, event: str, task: int, attempt: int) -> None:
        """The engine's events: a committed task's rows are no longer needed."""
        if event == "task_committed" and 0 <= task < len(self.windows):
            self.budget.release(self.windows[task].release())

    def stop(self) -> None:
        """The job ended: stop reading, free every window."""
        self._stop.set()
        for w in self.windows:
            w.close("the job ended")
            self.budget.release(w.release())
        self._thread.join(timeout=5)

    def stats(self) -> dict[str, Any]:
        return {
            "windows": len(self.windows),
            "window_bytes": self.window_bytes,
            "max_memory": self.options.max_memory,
            "peak_bytes_held": self.budget.peak,
            "producer_waits": self.budget.waits,
            "producer_wait_s": round(self.budget.wait_s, 3),
        }

    def _run(self) -> None:
        window: Window | None = None
        try:
            for batch in self._batches:
                if self._stop.is_set():
                    break
                if not isinstance(batch, pa.RecordBatch):
                    batch = pa.record_batch(batch)
                if batch.num_rows == 0:
                    continue
                if not self.window_bytes:
                    self.window_bytes = window_size(
                        batch, self.partition_by, self.options, self.concurrent, self.limits
                    )
                self.budget.acquire(batch.nbytes, self._stop)
                if window is None:
                    window = self._open_window()
                window.add(batch)
                if window.nbytes >= self.window_bytes:
                    self._close_window(window)
                    window = None
            if window is not None:
                self._close_window(window)
            self.feed.close()
        except BaseException as e:
            if window is not None:
                window.close(f"the input failed: {type(e).__name__}: {e}")
            self.feed.close(e)

    def _open_window(self) -> Window:
        window = Window(len(self.windows))
        self.windows.append(window)
        if self.publish_open:
            self.feed.put(self._work(window))
        return window

    def _close_window(self, window: Window) -> None:
        window.close()
        if not self.publish_open:
            self.feed.put(self._work(window))

    def _work(self, window: Window) -> Any:
        return functools.partial(window_task, self.schema, self.partition_by, self.options, window)
