"""The crash harness's reference job: small, deterministic, and self-describing.

4 tasks write 3 files each over 2 partition directories; task 1 also gets one speculative
duplicate attempt. The earlier data set of the existing-data scenarios spreads the same files
over one partition more (`WIDE_PARTITIONS`), so a partition overwrite has a partition to keep.
For a table committer (`tables.py`) each file is a small Parquet file of the same content, one
row per line. A file's name carries its task, file number and attempt, and its bytes carry
the job too, so output mixed from two attempts or two jobs is detectable by looking at it.

`unique_tasks()` is the same job with the job's tag in every file name (`-j<8 hex>`), as Spark
puts the write's UUID in its file names: two jobs into one destination (an append, racing
jobs) then never write the same name, and a file's job is known from its name alone.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from ..commit.protocol.inflight import published_name
from ..engine.attempt import TaskOutput
from .job_files import PARTITIONS as PARTITIONS
from .job_files import file_bytes as file_bytes
from .job_files import file_path as file_path
from .job_files import job_tag as job_tag
from .tables import write_table_file, writes_tables
from .zoo_files import VALUES_DIFFER, parse_zoo_file, zoo_file_bytes

TASKS = 4
FILES_PER_TASK = 3
WIDE_PARTITIONS = PARTITIONS + 1
JOB_PARTITIONS = tuple(f"part=p{i}" for i in range(PARTITIONS))  # where the job writes
SPECULATIVE_TASK = 1

# unique names carry the job's tag; committers that write in place add a job/task/attempt tag
# of their own before the extension
_NAME = re.compile(
    r"^part=p(\d+)/t(\d+)-f(\d+)-a(\d+)(?:-j([0-9a-f]{8}))?(?:-[0-9a-f]{8}-t\d+-a\d+)?\.dat$"
)


def writes_zoo_files(committer: Any) -> bool:
    """Whether the reference job writes the type zoo as Parquet for a files committer: the
    direct committer's (and its variants'), whose files users read as a Parquet data set."""
    from ..commit.direct.committer import DirectCommitter

    return isinstance(committer, DirectCommitter)


def reference_bytes(committer: Any, task: int, file: int, attempt: int, job_uuid: str) -> bytes:
    """A files committer's reference file: the zoo in Parquet, or the text lines."""
    if writes_zoo_files(committer):
        return zoo_file_bytes(task, file, attempt, job_uuid)
    return file_bytes(task, file, attempt, job_uuid)


def reference_work(task: int, out: TaskOutput) -> None:
    if writes_tables(out.committer):
        for f in range(FILES_PER_TASK):
            write_table_file(out, task, f, "", PARTITIONS, out.committer)
        return
    for f in range(FILES_PER_TASK):
        out.write(
            file_path(task, f, out.attempt_number),
            reference_bytes(out.committer, task, f, out.attempt_number, out.job_uuid),
        )


def unique_work(
    task: int, out: TaskOutput, files: range | None = None, partitions: int = PARTITIONS
) -> None:
    """The reference task with the job's tag in its file names (`files`: only these), over
    `partitions` partition directories."""
    if writes_tables(out.committer):
        for f in files if files is not None else range(FILES_PER_TASK):
            write_table_file(out, task, f, job_tag(out.job_uuid), partitions, out.committer)
        return
    for f in files if files is not None else range(FILES_PER_TASK):
        out.write(
            file_path(task, f, out.attempt_number, job_tag(out.job_uuid), partitions),
            reference_bytes(out.committer, task, f, out.attempt_number, out.job_uuid),
        )


def reference_tasks() -> list[functools.partial]:
    return [functools.partial(reference_work, t) for t in range(TASKS)]


def unique_tasks(partitions: int = PARTITIONS) -> list[functools.partial]:
    return [functools.partial(unique_work, t, partitions=partitions) for t in range(TASKS)]


def attempt_of(path: str) -> tuple[int, int] | None:
    """(task, attempt) of a reference output path, from its name alone; None for another."""
    m = _NAME.match(path)
    return (int(m.group(2)), int(m.group(4))) if m else None


@dataclass(frozen=True)
class ParsedFile:
    task: int
    file: int
    attempt: int
    job_uuid: str | None  # None: the bytes are not what any attempt writes
    tag: str | None = None  # the job tag in a unique name (None: a name without one)
    wrong: str = ""  # how the rows' values differ from what the attempt wrote ('' if not)


def parse_file(path: str, data: bytes) -> ParsedFile | None:
    """Identify an output file; None if its path is not a reference output path. A file under
    its in-flight name is still the job's (a reader that lists by directory reads it)."""
    m = _NAME.match(published_name(path))
    if not m:
        return None
    part, task, file, attempt = (int(g) for g in m.groups()[:4])
    tag = m.group(5)
    if part not in (file % PARTITIONS, file % WIDE_PARTITIONS):
        return None
    if task >= TASKS or file >= FILES_PER_TASK:
        return None
    job, wrong = None, ""
    zoo = parse_zoo_file(data)
    if zoo is not None:  # a zoo file (direct's): whole, of this attempt, its values checked
        if (zoo.task, zoo.file, zoo.attempt) == (task, file, attempt):
            job, wrong = (None, zoo.wrong) if zoo.wrong else (zoo.job_uuid, "")
    else:
        first = data.split(b"\n", 1)[0].decode(errors="replace")
        jm = re.match(r"^task=\d+ file=\d+ attempt=\d+ job=(\S+)$", first)
        if jm and data == file_bytes(task, file, attempt, jm.group(1)):
            job = jm.group(1)
        elif jm:  # a table view's file whose rows are there but whose values differ
            said = [
                x for x in data.decode(errors="replace").splitlines() if x.startswith(VALUES_DIFFER)
            ]
            wrong = said[0][len(VALUES_DIFFER) :] if said else ""
    if job is not None and tag is not None and job_tag(job) != tag:
        job = None  # another job's bytes under this job's name
    return ParsedFile(task, file, attempt, job, tag, wrong)
