"""Whose file a marker names: the tag every data file's name carries for the job that wrote it.

A marker is only a claim ("my job is writing this file"), and anyone who can write a file into a
marker directory, or holds the marker service's token, can make one. So nothing deletes what a
marker names on the marker's word alone: the data file's own name must carry the tag of the job
the marker directory belongs to. Writers put it there:

    dataferry's files      `<stem>-<job8>-t<task>-a<attempt>[.<ext>]`, in `<root>/<job uuid>/`
                           (`job8`: the job uuid's first 8 characters)
    Hudi's base files      `<fileId>_<writeToken>_<instant>.<ext>`, in `.hoodie/.temp/<instant>/`

The tag is the writer's claim of ownership that a marker alone cannot make; the deleting paths
also keep whatever a committed version references (a tag is short, and a forger can name a
marker directory after a committed job), which only the committer can tell.
"""

from __future__ import annotations

import re

from ..store import paths

HUDI_MARKERS_ROOT = ".hoodie/.temp"


def attempt_tag(job_uuid: str, task_index: int, attempt_number: int) -> str:
    """`-<job8>-t<task>-a<attempt>`: what makes a data file's name unique to its attempt."""
    return f"-{job_uuid[:8]}-t{task_index}-a{attempt_number}"


# the tag at the very end of the name's stem, before at most one extension
_TAG = re.compile(r"(-[^/]{1,8}-t\d+-a\d+)(?:\.[^./]*)?\Z")
_HUDI_BASE = re.compile(r"[^_/]+_[^_/]+_(?P<instant>\d{14}|\d{17})\.[^./]+")


def attempt_tag_of(name: str) -> str | None:
    """The attempt tag a file name ends with (before its extension); None if it has none."""
    m = _TAG.search(name)
    return m.group(1) if m else None


def named_for_job(path: str, job_uuid: str) -> bool:
    """Whether the data file's name ends with the tag of the job whose uuid is `job_uuid`."""
    tag = rf"-{re.escape(job_uuid[:8])}-t\d+-a\d+(?:\.[^./]*)?\Z"
    return bool(job_uuid) and re.search(tag, paths.name(path)) is not None


def owned_by_marker_dir(directory: str, data_file: str) -> bool:
    """Whether a marker in `directory` may stand for `data_file`: the file's name carries the
    tag of the job the directory belongs to (its last component: a job uuid, or a Hudi
    instant under `.hoodie/.temp`)."""
    directory = paths.normalize(directory)
    job = paths.name(directory)
    if paths.parent(directory) == HUDI_MARKERS_ROOT:
        m = _HUDI_BASE.fullmatch(paths.name(data_file))
        return bool(m and m["instant"] == job)
    return named_for_job(data_file, job)


def tag_hint(directory: str) -> str:
    """What the names of files marked in `directory` must look like, for error messages."""
    job = paths.name(paths.normalize(directory))
    if paths.parent(paths.normalize(directory)) == HUDI_MARKERS_ROOT:
        return f"<fileId>_<writeToken>_{job}.<ext>"
    return f"<name>-{job[:8]}-t<task>-a<attempt>[.<ext>]"
