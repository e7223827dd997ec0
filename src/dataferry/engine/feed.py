"""Tasks that become known while a job runs.

A streamed write does not know its tasks up front: a producer thread reads the input and
adds a task whenever it starts a new window of rows. The driver takes what has arrived between
two rounds of its scheduling loop, so it never waits on the producer while attempts need
committing (and the producer, waiting for memory that committed tasks free, never waits on a
driver that waits on it).
"""

from __future__ import annotations

import queue
from typing import Any

from ..errors import EngineError


class FeedFailed(EngineError):
    """The producer of a feed failed; `error` is what it raised."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"the job's input failed: {type(error).__name__}: {error}")
        self.error = error


_END = object()


class TaskFeed:
    """A queue of task works with an end: `put` and `close` from the producer, `take` from
    the driver."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        self._error: BaseException | None = None
        self.done = False  # the driver has seen the end

    def put(self, work: Any) -> None:
        self._queue.put(work)

    def close(self, error: BaseException | None = None) -> None:
        """No more tasks; `error` if the producer failed."""
        self._error = error
        self._queue.put(_END)

    def take(self, timeout: float) -> list[Any]:
        """Every task that has arrived, waiting up to `timeout` seconds for the first.
        Raises FeedFailed once the producer's failure is reached."""
        works: list[Any] = []
        block = timeout > 0
        while not self.done:
            try:
                item = self._queue.get(block=block and not works, timeout=timeout or None)
            except queue.Empty:
                break
            if item is _END:
                self.done = True
                if self._error is not None:
                    raise FeedFailed(self._error)
                break
            works.append(item)
        return works
