"""What travels between a committer's parts: a task's commit message, a job commit's result, and
what a dead job may have left (a leftover for `dataferry cleanup`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...stats import IOStatistics


@dataclass(frozen=True)
class TaskCommitMessage:
    """What a committed task attempt tells the driver. Small, picklable, JSON-ready."""

    job_id: str
    task_id: str
    attempt_id: str
    committer: str
    files: tuple[str, ...] = ()
    bytes: int = 0
    iostatistics: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class JobCommitResult:
    """What job commit did: files and bytes committed, stage timings, statistics."""

    job_id: str
    committer: str
    files: int
    bytes: int
    success_path: str | None
    stage_seconds: dict[str, float]
    iostatistics: IOStatistics
    filenames: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Leftover:
    """What a job that is no longer running may have left: its directory, and whose it is."""

    path: str
    committer: str
    job_uuid: str = ""
    attempt: int = 0
