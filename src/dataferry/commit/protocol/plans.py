"""The typed plans of a job commit: what a committer's planning stages decided (`CommitPlan`,
its `payload` the committer's own `Plan` struct, saved in the intent record) and what its apply
stages did (`Applied`).

Each committer declares its plan's type (`plan_type`, a frozen `Plan` subclass); the job commit
writes the struct into the intent record, and every reader of a record decodes its plan as
that type (`records.intent.decode_plan`: strict types, a damaged plan refused naming the record
and the field), so planning, applying and recovery share one declared shape, not a dict's keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

Count = Annotated[int, msgspec.Meta(ge=0)]
"""A number of files, bytes or entries."""
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
"""A path or id that cannot be empty."""


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every committer's plan: a frozen struct whose field names are the keys of its
    JSON object in the intent record (keep them: records of earlier versions must still load).
    Unknown keys are ignored, so a record with a field added later still loads."""


@dataclass
class CommitPlan:
    """What a committer's planning stages decided; nothing visible has changed yet.
    `payload` goes into the intent record: apply works from it alone. `written`: the files
    it publishes, where the committer found them itself (v1 lists its committed tasks at job
    commit, not at task commit); None: the task commit messages name them."""

    payload: Plan | dict[str, Any]  # a dict: a committer without a plan type
    files: int = 0
    bytes: int = 0
    written: list[str] | None = None


def plan_type_of(committer: Any) -> type[Plan] | None:
    """The type a committer's intent records decode their plan as (its `plan_type`); None:
    the plan is a dict, written and read unchecked (a committer of another project that
    declares none; every dataferry committer declares one)."""
    return committer.plan_type


@dataclass
class Applied:
    """What a committer's apply stages did (files committed, and its own counters)."""

    files: int = 0
    bytes: int = 0
    filenames: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
