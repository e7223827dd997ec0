"""The thin committer base: a committer's hooks (`protocol.CommitterHooks`) plus the job-level
calls every committer shares, each one the job machinery's (`job/`): commit a job, abort it,
find what a write mode replaces, and recover what a dead job left.

A new committer subclasses `Committer` and implements the hooks; it writes no job commit of
its own (Hadoop's committers chain their stages on one `CommitJobStage` the same way).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InjectedCrash
from ..ids import new_job_id
from ..store import Store
from .job.commit import commit_job
from .job.recovery import recover_job
from .job.stages import visible_entries
from .job.vouch import OWN_DRIVER
from .lookup import committer_by_name
from .protocol import (
    CommitPlan,
    CommitterHooks,
    JobCommitResult,
    JobContext,
    Leftover,
    TaskCommitMessage,
)
from .records.drivers import abandon_driver, driver_crashed, end_driver
from .records.intent import intent_path


class Committer(CommitterHooks):
    """A committer bound to a destination store and a configuration."""

    def commit_job(self, job: JobContext, messages: Sequence[TaskCommitMessage]) -> JobCommitResult:
        """Commit the job: all of its committed tasks' output becomes visible, or none does."""
        return commit_job(self, job, messages)

    def abort_job(self, job: JobContext) -> None:
        """Undo a job that has not decided its commit; finish one that has (once its intent
        record is saved, finishing is the only way to leave the destination whole)."""
        try:
            with self.stats.duration("job_stage_abort"):
                recover_job(self, job, vouched=OWN_DRIVER)  # the job's own driver asks
        except InjectedCrash:
            driver_crashed(self.store, job.job_uuid)  # the driver died: its record stays
            raise
        except Exception:
            if self.store.exists(intent_path(self.job_dir(job))):
                abandon_driver(self.store, job.job_uuid)  # decided: its record vouches for it
            else:
                end_driver(self.store, job.job_uuid)  # given up: what is left is cleanup's
            raise
        end_driver(self.store, job.job_uuid)
        self.sweep_late_attempts(job)

    def sweep_late_attempts(self, job: JobContext) -> None:
        """Remove what attempts still running wrote into the job's directory after the abort
        removed it (Dask runs a failed graph's other tasks to their end). An attempt that
        commits after the driver record is gone removes its own output (`job_ended`); one
        that committed before is removed here, after the record."""
        if not self.sweeps_late_attempts:
            return  # its late attempts' files are found by their records (cleanup's work)
        job_dir = self.job_dir(job)
        if job.job_uuid not in job_dir:
            return  # a directory jobs share (v1's `_temporary/0`): cleanup's, not the abort's
        if self.store.exists(job_dir):
            self.store.delete(job_dir, recursive=True)
            self.stats.incr("committer_late_attempts_swept")
        type(self).tidy(self.store)

    def existing_data(self, job: JobContext, plan: CommitPlan) -> list[str]:
        """What of the destination a write mode sees as data (and `overwrite` replaces)."""
        return visible_entries(self)

    @classmethod
    def recover_leftover(cls, store: Store, leftover: Leftover, rollback: bool = False) -> str:
        """Finish or undo the job that left `leftover`, then remove it; returns what was done."""
        committer = committer_by_name(leftover.committer, store)
        job = committer.new_job(new_job_id(job_uuid=leftover.job_uuid), attempt=leftover.attempt)
        outcome = recover_job(committer, job, rollback=rollback)
        store.delete(leftover.path, recursive=True)
        return outcome
