"""The per-process pusher: map tasks hand it their output and return at once.

Spark's `ShuffleBlockPusher` pushes a finished map's blocks on its own threads while the
executor computes its next map. Here one pusher per process (a Dask worker, a pool worker)
takes map outputs in the order they finish and pushes one at a time through
`push_map_output` (its merger threads keep the bytes on the wire under
`max_bytes_in_flight`), announcing each map's completion to the mergers. While waiting, a map
output is held in the buffers the map encoded it into as long as the held total stays within
`max_held_bytes`; past it the pusher reads it back from its file. Pushing stays best effort:
whatever a pusher never gets to is read from the map outputs by the reducers.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from ..stats import IOStatistics
from ..store import Store
from .blocks import Pieces
from .per_process import PerProcess
from .pusher import PushReport, PushTarget, push_map_output

log = logging.getLogger("dataferry.shuffle")


@dataclass(frozen=True)
class _Job:
    store: Store
    target: PushTarget
    map_index: int
    attempt: int
    offsets: tuple[int, ...]
    blocks: Sequence[Pieces] | None
    held: int  # bytes of `blocks` counted against max_held_bytes
    queued_at: float
    done: Future
    location: str  # the service whose directory holds the map output


class BackgroundPusher:
    """Pushes map outputs on a thread of its own; `submit` returns a Future of the report."""

    def __init__(self) -> None:
        self.stats = IOStatistics()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._held = 0
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        # a daemon: a process that exits with pushes queued drops them (reducers read the
        # map outputs instead) rather than waiting for them
        threading.Thread(target=self._run, name="shuffle-pusher", daemon=True).start()

    def submit(
        self,
        store: Store,
        target: PushTarget,
        map_index: int,
        attempt: int,
        offsets: Sequence[int],
        blocks: Sequence[Pieces] | None = None,
        location: str = "",
    ) -> Future:
        size = offsets[-1] if offsets else 0
        with self._lock:
            hold = blocks is not None and self._held + size <= target.config.max_held_bytes
            held = size if hold else 0
            self._held += held
            self._pending += 1
            self.stats.maximum("push_held_bytes_peak", self._held)
            self.stats.maximum("push_queue_peak", self._pending)
        self.stats.incr("push_maps_from_memory" if hold else "push_maps_from_file")
        done: Future = Future()
        self._jobs.put(
            _Job(
                store,
                target,
                map_index,
                attempt,
                tuple(offsets),
                blocks if hold else None,
                held,
                time.perf_counter(),
                done,
                location,
            )
        )
        return done

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            started = time.perf_counter()
            self.stats.record_duration("push_queued", started - job.queued_at)
            try:
                report = push_map_output(
                    job.store,
                    job.target,
                    job.map_index,
                    job.attempt,
                    job.offsets,
                    self.stats,
                    job.blocks,
                    announce=True,
                    location=job.location,
                )
            except Exception as e:  # never let one map's failure stop the pusher
                log.warning("shuffle pusher: map %d: %r", job.map_index, e)
                report = PushReport(stopped=f"{type(e).__name__}: {e}")
            self.stats.record_duration("push_map", time.perf_counter() - started)
            self.stats.incr("push_maps")
            with self._lock:
                self._held -= job.held
                self._pending -= 1
                self._idle.notify_all()
            job.done.set_result(report)

    @property
    def pending(self) -> int:
        """Map outputs submitted and not yet pushed."""
        return self._pending

    @property
    def held_bytes(self) -> int:
        return self._held

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every submitted map output is pushed; False if `timeout` passed first."""
        with self._lock:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)


_pusher = PerProcess(BackgroundPusher)


def process_pusher() -> BackgroundPusher:
    """This process's pusher (one per process; a forked child gets its own)."""
    return _pusher.get()
