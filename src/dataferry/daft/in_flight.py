"""The write calls of each job running in this process, so an abort waits for them.

Daft's native runner runs a sink's write calls on threads of the driver's process and raises
as soon as one fails, while the others may still be writing. An abort that rolled the job back
then would leave the files those calls go on to write. `InFlight` counts the calls of each job
and, once a job is closed, refuses new ones and lets `close` wait for the running ones.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import EngineError

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 60.0  # a call still writing after this long is left to cleanup


class InFlight:
    """Running write calls per job (by job uuid), and the jobs closed to new calls."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running: dict[str, int] = {}
        self._closed: set[str] = set()

    @contextmanager
    def call(self, job_uuid: str) -> Iterator[None]:
        """One write call of the job; EngineError if the job was closed (aborted)."""
        with self._changed:
            if job_uuid in self._closed:
                raise EngineError(f"job {job_uuid} was aborted: this write call is not run")
            self._running[job_uuid] = self._running.get(job_uuid, 0) + 1
        try:
            yield
        finally:
            with self._changed:
                self._running[job_uuid] -= 1
                if not self._running[job_uuid]:
                    del self._running[job_uuid]
                self._changed.notify_all()

    def close(self, job_uuid: str, wait_s: float = CLOSE_WAIT_S) -> int:
        """Refuse the job's new calls and wait for its running ones; how many still run."""
        with self._changed:
            self._closed.add(job_uuid)
            self._changed.wait_for(lambda: job_uuid not in self._running, timeout=wait_s)
            left = self._running.get(job_uuid, 0)
        if left:
            log.warning("job %s: %d write calls still running at its abort", job_uuid, left)
        return left


IN_FLIGHT = InFlight()
