"""What the reference job's files are called and hold: a file's path names its partition,
task, file number and attempt (and, for unique names, its job's tag); its bytes name the job
too. Shared by the reference job (`reference.py`) and the table view of it (`tables.py`)."""

from __future__ import annotations

PARTITIONS = 2  # the partition directories the reference job writes over


def job_tag(job_uuid: str) -> str:
    """The 8 hex digits of a job's UUID that unique file names carry."""
    return job_uuid.replace("-", "")[:8]


def file_path(
    task: int, file: int, attempt: int, tag: str = "", partitions: int = PARTITIONS
) -> str:
    suffix = f"-j{tag}" if tag else ""
    return f"part=p{file % partitions}/t{task}-f{file}-a{attempt}{suffix}.dat"


def file_bytes(task: int, file: int, attempt: int, job_uuid: str) -> bytes:
    line = f"task={task} file={file} attempt={attempt} job={job_uuid}\n"
    return (line * (1 + file)).encode()
