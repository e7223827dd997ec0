"""Where a staging job keeps its things.

In the destination, per job attempt: `__staging_job-<jobUUID>/<NN>/` holds the intent record
and `tasks/<taskAttemptId>.uploads` (each attempt's keys and upload ids, written before a byte
is sent). Pendingsets go to `<attemptId>.pendingset` in the job attempt directory of the
pendingset store (the destination unless `pendingset_dir` names another): one per attempt, so a
late attempt never overwrites the one the driver chose. On the worker, an attempt writes its
files under `<staging_dir>/<destination>-<jobUUID>/<taskAttemptId>/`, where `<destination>`
is a short digest of the destination's URL: two jobs that share a job id (Spark has reused them)
but write to different places never share a staging directory.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

from ...protocol import JobContext, TaskAttemptContext

STAGING_PREFIX = "__staging_job-"
UPLOADS_SUFFIX = ".uploads"
PENDINGSET_SUFFIX = ".pendingset"


def jobs_dir(job: JobContext) -> str:
    return f"{STAGING_PREFIX}{job.job_uuid}"


def job_attempt_dir(job: JobContext) -> str:
    return f"{jobs_dir(job)}/{job.attempt:02d}"


def tasks_dir(job: JobContext) -> str:
    return f"{job_attempt_dir(job)}/tasks"


def uploads_record(task: TaskAttemptContext) -> str:
    return f"{tasks_dir(task.job)}/{task.attempt_id}{UPLOADS_SUFFIX}"


def pendingset_path(job: JobContext, attempt_id: str) -> str:
    return f"{job_attempt_dir(job)}/{attempt_id}{PENDINGSET_SUFFIX}"


def staging_root(staging_dir: str | None) -> str:
    return staging_dir or os.path.join(tempfile.gettempdir(), "dataferry-staging")


def local_job_dir(staging_dir: str | None, job: JobContext) -> str:
    where = hashlib.sha256(job.store.full_url().encode()).hexdigest()[:12]
    return os.path.join(staging_root(staging_dir), f"{where}-{job.job_uuid}")


def local_attempt_dir(staging_dir: str | None, task: TaskAttemptContext) -> str:
    return os.path.join(local_job_dir(staging_dir, task.job), str(task.attempt_id))
