"""Where the manifest committer keeps things, exactly as Hadoop's current code lays them out.

$dest/_temporary/<jobUUID>/<NN>/                        job attempt directory
$dest/_temporary/<jobUUID>/<NN>/tasks/<taskAttemptId>/  task attempt work directory
$dest/_temporary/<jobUUID>/<NN>/manifests/<taskId>-manifest.json          committed manifest
$dest/_temporary/<jobUUID>/<NN>/manifests/<taskAttemptId>-manifest.json.tmp   while saving
$dest/_temporary/<jobUUID>/<NN>/_SUCCESS.<random>.tmp   then renamed to $dest/_SUCCESS

Inside a task attempt's work directory this committer's own attempts name each file flat
(`day=a%2Fpart-0.parquet.flat.inflight`, `protocol/inflight.py`) rather than in
subdirectories; the task commit reads both forms, so a Hadoop task's tree commits as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol import JobContext, TaskAttemptContext
from ..records.success import SUCCESS_FILE

PENDING_DIR = "_temporary"
TASKS_SUBDIR = "tasks"
MANIFESTS_SUBDIR = "manifests"
MANIFEST_SUFFIX = "-manifest.json"
TMP_SUFFIX = ".tmp"


@dataclass(frozen=True)
class JobLayout:
    job_uuid: str
    attempt: int

    @classmethod
    def of(cls, job: JobContext) -> JobLayout:
        return cls(job.job_uuid, job.attempt)

    @property
    def job_dir(self) -> str:
        return f"{PENDING_DIR}/{self.job_uuid}"

    @property
    def job_attempt_dir(self) -> str:
        return f"{self.job_dir}/{self.attempt:02d}"

    @property
    def tasks_dir(self) -> str:
        return f"{self.job_attempt_dir}/{TASKS_SUBDIR}"

    @property
    def manifests_dir(self) -> str:
        return f"{self.job_attempt_dir}/{MANIFESTS_SUBDIR}"

    @property
    def success_tmp(self) -> str:
        return f"{self.job_attempt_dir}/{SUCCESS_FILE}{TMP_SUFFIX}"

    def task_attempt_dir(self, task: TaskAttemptContext) -> str:
        return f"{self.tasks_dir}/{task.attempt_id}"

    def manifest_path(self, task_id: str) -> str:
        return f"{self.manifests_dir}/{task_id}{MANIFEST_SUFFIX}"

    def manifest_tmp_path(self, attempt_id: str) -> str:
        return f"{self.manifests_dir}/{attempt_id}{MANIFEST_SUFFIX}{TMP_SUFFIX}"
