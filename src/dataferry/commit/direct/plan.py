"""The direct committer's plan, saved in its intent record."""

from __future__ import annotations

from typing import Any

from ..protocol import Count, Plan


class DirectPlan(Plan, kw_only=True):
    """The files the job commits (reported by its committed attempts, each marked), the
    marked files of other attempts it deletes first, and how many markers it found."""

    files: list[str]
    stray: list[str]
    marked: Count


def plan_files(payload: DirectPlan | dict[str, Any]) -> list[str]:
    """The files a decided plan commits. A dict is a table committer's plan, whose committers
    extend this one's as a dict (`protocol.plans.plan_type_of`)."""
    return payload["files"] if isinstance(payload, dict) else payload.files
