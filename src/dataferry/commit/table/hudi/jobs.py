"""A Hudi job's instant around the committer's job setup (a base of `HudiCommitter`).

new_job      a new job (no id given) first recovers the table's dead jobs, then takes its
             instant, reserved (`instants.py`): as Hudi rolls failed writes back before it
             makes a new instant time, a recovery's `.rollback` sorts before the commit
             that follows it (a recovery run in setup, after the instant was taken, would
             sort after it)
setup_job    looks for dead jobs only when the table holds another job's instant (its own
             reservation is no dead job's, and a look takes the destination's claim);
             a setup that fails before the instant is requested (a table `error`
             refuses, damage) gives the reservation back, so a refused job leaves nothing
"""

from __future__ import annotations

from typing import Any

from ....errors import InjectedCrash
from ....store import Store
from ...protocol import JobContext
from .config import instant_of
from .instants import record_of, release
from .timeline import HOODIE, TEMP, instant_of_name


class InstantJobs:
    """`new_job`, `clean_dead_jobs` and `setup_job` of the Hudi committer (over the table
    committer's)."""

    store: Store
    _cleaned = False  # the last new job looked for dead jobs: its setup need not again
    _own = ""  # the instant of the job being set up

    def new_job(self, job_id: Any = None, attempt: int = 0) -> JobContext:
        if job_id is None:
            self.clean_dead_jobs()
        job = super().new_job(job_id, attempt)  # type: ignore[misc]
        self._cleaned = job_id is None
        return job

    def clean_dead_jobs(self) -> None:
        if self._cleaned:
            self._cleaned = False
            return
        if all(e.name == self._own for e in self.store.list_or_empty(TEMP)):
            return  # no instant but this job's own: no dead job's
        super().clean_dead_jobs()  # type: ignore[misc]

    def setup_job(self, job: JobContext) -> None:
        self._own = instant_of(job)
        try:
            super().setup_job(job)  # type: ignore[misc]
        except InjectedCrash:
            raise  # a dead driver gives nothing back
        except Exception:
            self._give_back(job)
            raise
        finally:
            self._own = ""

    def _give_back(self, job: JobContext) -> None:
        """Remove the job's reservation of its instant if nothing else of it was made (no
        timeline file, no marker): the instant was never requested."""
        instant = instant_of(job)
        record = record_of(self.store, instant)
        if record is None or record.get("job_uuid") != job.job_uuid:
            return
        if any(instant_of_name(e.name) == instant for e in self.store.list_or_empty(HOODIE)):
            return
        if len(self.store.list_or_empty(f"{TEMP}/{instant}")) == 1:
            release(self.store, instant)
            self.store.delete_if_empty(TEMP)
