"""A stream's rows handed from the producer to its segment's writer in memory, not spilled.

The straight-through form of a stream segment (`stream.py`): the producer adds batches, the one
attempt that reads the segment takes them as they come and writes them to its open partition
files, and a batch is let go as soon as it is read. The producer waits while the writer is
`max_memory // 2` behind, so memory holds at most that lead and the writer's own buffers, and
no row of the stream goes to local disk.

Nothing is kept for a second reader: a retried or speculative attempt of a segment that an
earlier attempt began reading fails at once (the stream is read once, and its rows are gone), so
the job fails and aborts, leaving nothing. Writes that need retries of a stream's tasks use the
spilled form (`spill.Segment`), which every attempt can read from its start.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from ..errors import ConfigError, EngineError
from .spill import ENDED_CHECK_S, POLL_S, SpillStats


class HandoffSegment:
    """The rows of one task, held in memory only until its one reader takes them.

    Same producer's and reader's interface as `spill.Segment`: `nbytes` and `published` are
    the in-memory bytes added so far (a batch is readable as soon as it is added), `progress`
    the bytes the reader has taken (the producer's back-pressure).
    """

    remote = False  # read in this process only (it is not sent to another one)

    def __init__(
        self,
        index: int,
        cond: threading.Condition | None = None,
        stats: SpillStats | None = None,
    ) -> None:
        self.index = index
        self.nbytes = 0
        self.rows = 0
        self.published = 0
        self.progress = 0
        self.closed = False
        self.stats = stats if stats is not None else SpillStats()  # stays at zero: no spill
        self._cond = cond if cond is not None else threading.Condition()
        self._batches: deque[pa.RecordBatch] = deque()
        self._failed: str | None = None
        self._bad = False
        self._removed = False
        self._claimed = False

    # --- the producer --------------------------------------------------------------------------

    def open(self) -> None:
        """(Nothing to create: the rows stay in memory.)"""

    def add(self, batch: pa.RecordBatch) -> None:
        """Hand one batch to the reader (readable at once)."""
        with self._cond:
            self._batches.append(batch)
            self.nbytes += batch.nbytes
            self.published = self.nbytes
            self.rows += batch.num_rows
            self._cond.notify_all()

    def close(self, failed: str | None = None, bad_input: bool = False) -> None:
        """No more rows (with `failed`: why the input ended early; its reader fails, with a
        ConfigError if `bad_input`)."""
        with self._cond:
            if self.closed:
                return
            self._failed, self._bad = failed, bad_input
            self.closed = True
            self._cond.notify_all()

    def remove(self) -> None:
        """The task is committed (or the job ended): drop what is left."""
        with self._cond:
            self._batches.clear()
            self._removed = True
            self.progress = self.nbytes  # nothing of it is waiting for a reader any more
            self._cond.notify_all()

    # --- the reader ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self.read()

    def read(self, ended: Callable[[], bool] | None = None) -> Iterator[pa.RecordBatch]:
        """The segment's batches in order, as the producer adds them; each is let go once
        taken. Only one reader: a second attempt of the segment fails (its rows are gone)."""
        with self._cond:
            if self._claimed:
                raise EngineError(
                    f"stream segment {self.index}: an earlier attempt took its rows, which were "
                    "written straight through and not kept; a stream is read once, so this "
                    "task cannot be retried (run the write on worker processes, "
                    "engine=LocalEngineConfig(executor='processes'), to retry a stream's "
                    "tasks from a local spill)"
                )
            self._claimed = True
        return self._take(ended)

    def _take(self, ended: Callable[[], bool] | None) -> Iterator[pa.RecordBatch]:
        checked = time.monotonic()
        while True:
            with self._cond:
                while not self._batches and not self.closed and not self._removed:
                    self._cond.wait(POLL_S)
                    if ended is not None and time.monotonic() - checked >= ENDED_CHECK_S:
                        break
                if self._removed:
                    raise EngineError(f"stream segment {self.index} was removed (the job ended)")
                batch = self._batches.popleft() if self._batches else None
                if batch is not None:
                    self.progress += batch.nbytes
                    self._cond.notify_all()
                elif self.closed:
                    if self._failed is not None:
                        error = ConfigError if self._bad else EngineError
                        raise error(f"stream segment {self.index}: {self._failed}")
                    return
            if ended is not None and time.monotonic() - checked >= ENDED_CHECK_S:
                if ended():
                    raise EngineError(f"stream segment {self.index}: the job ended")
                checked = time.monotonic()
            if batch is not None:
                yield batch
                del batch

    def __reduce__(self) -> Any:
        raise EngineError(
            f"stream segment {self.index} is held in this process's memory and cannot be sent "
            "to another process (a stream on worker processes is spilled)"
        )
