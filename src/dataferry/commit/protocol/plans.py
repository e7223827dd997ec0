"""The typed plans of a job commit: what a committer's planning stages decided (`CommitPlan`,
saved in the intent record) and what its apply stages did (`Applied`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CommitPlan:
    """What a committer's planning stages decided; nothing visible has changed yet.
    `payload` goes into the intent record: apply works from it alone. `written`: the files
    it publishes, where the committer found them itself (v1 lists its committed tasks at job
    commit, not at task commit); None: the task commit messages name them."""

    payload: dict[str, Any]
    files: int = 0
    bytes: int = 0
    written: list[str] | None = None


@dataclass
class Applied:
    """What a committer's apply stages did (files committed, and its own counters)."""

    files: int = 0
    bytes: int = 0
    filenames: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
