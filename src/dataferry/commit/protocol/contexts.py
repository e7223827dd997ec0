"""Job and task-attempt contexts: frozen dataclasses that pickle, so a task attempt on any worker
needs only its `TaskAttemptContext` to set up, write, commit or abort."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ids import JobId, TaskAttemptId, TaskId
from ...store import Store

MODES = ("error", "append", "overwrite", "overwrite-partitions")
# modes whose commit deletes earlier data: everything visible, or the partitions written
REPLACING_MODES = ("overwrite", "overwrite-partitions")


@dataclass(frozen=True)
class JobContext:
    """One attempt at one job writing into `store` (rooted at the destination)."""

    job_id: JobId
    store: Store
    committer: str
    config: Any
    attempt: int = 0
    mode: str = "append"  # what the commit does with data already there (see MODES)
    claim: bool = True  # hold the destination's claim while committing (not for staging)
    # the job's driver record exists from setup until the job ends (`records/drivers.py`): an
    # attempt that commits once it is gone belongs to a job that ended, and removes its output
    driver_recorded: bool = False

    @property
    def job_uuid(self) -> str:
        return self.job_id.uuid

    def task(self, index: int, attempt: int = 0) -> TaskAttemptContext:
        return TaskAttemptContext(self, self.job_id.task(index).attempt(attempt))


@dataclass(frozen=True)
class TaskAttemptContext:
    job: JobContext
    attempt_id: TaskAttemptId

    @property
    def task_id(self) -> TaskId:
        return self.attempt_id.task

    @property
    def task_index(self) -> int:
        return self.attempt_id.task.index

    @property
    def attempt_number(self) -> int:
        return self.attempt_id.number
