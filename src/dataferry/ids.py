"""Job, task and attempt identifiers in Hadoop's string shapes.

Job ids must never collide, even for two jobs started in the same second (the bug class of
SPARK-33402 / HADOOP-17318, where second-resolution job ids made two jobs share a staging
directory). A job id here therefore carries random bits from a UUID as well as the time.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass

_JOB_RE = re.compile(r"^job_([A-Za-z0-9]+)_(\d+)$")
_TASK_RE = re.compile(r"^task_([A-Za-z0-9]+)_(\d+)_([mr])_(\d+)$")
_ATTEMPT_RE = re.compile(r"^attempt_([A-Za-z0-9]+)_(\d+)_([mr])_(\d+)_(\d+)$")


@dataclass(frozen=True, order=True)
class JobId:
    """`job_<tracker>_<number>`; `uuid` names the job's directories (Spark's writeJobUUID)."""

    tracker: str
    number: int
    uuid: str

    def __str__(self) -> str:
        return f"job_{self.tracker}_{self.number:04d}"

    def task(self, index: int, kind: str = "m") -> TaskId:
        return TaskId(self, kind, index)


@dataclass(frozen=True, order=True)
class TaskId:
    job: JobId
    kind: str
    index: int

    def __str__(self) -> str:
        return f"task_{self.job.tracker}_{self.job.number:04d}_{self.kind}_{self.index:06d}"

    def attempt(self, number: int) -> TaskAttemptId:
        return TaskAttemptId(self, number)


@dataclass(frozen=True, order=True)
class TaskAttemptId:
    task: TaskId
    number: int

    def __str__(self) -> str:
        t = self.task
        return f"attempt_{t.job.tracker}_{t.job.number:04d}_{t.kind}_{t.index:06d}_{self.number}"


def new_job_id(number: int = 0, *, job_uuid: str | None = None) -> JobId:
    """A fresh job id: the UTC time to the second plus 12 hex digits of a UUID (48 random
    bits: 5,000 jobs in one second share one with odds of 1 in 20 million; 8 digits made that
    1 in 340)."""
    u = job_uuid or str(uuid.uuid4())
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    return JobId(tracker=f"{stamp}{u.replace('-', '')[:12]}", number=number, uuid=u)


def parse_job_id(text: str, job_uuid: str | None = None) -> JobId:
    m = _JOB_RE.match(text)
    if not m:
        raise ValueError(f"not a job id: {text!r} (expected job_<tracker>_<number>)")
    return JobId(m.group(1), int(m.group(2)), job_uuid or text)


def parse_task_attempt_id(text: str) -> TaskAttemptId:
    m = _ATTEMPT_RE.match(text)
    if not m:
        raise ValueError(f"not a task attempt id: {text!r}")
    job = JobId(m.group(1), int(m.group(2)), f"job_{m.group(1)}_{m.group(2)}")
    return TaskAttemptId(TaskId(job, m.group(3), int(m.group(4))), int(m.group(5)))


def parse_task_id(text: str) -> TaskId:
    m = _TASK_RE.match(text)
    if not m:
        raise ValueError(f"not a task id: {text!r}")
    job = JobId(m.group(1), int(m.group(2)), f"job_{m.group(1)}_{m.group(2)}")
    return TaskId(job, m.group(3), int(m.group(4)))
