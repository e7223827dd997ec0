"""The direct committer's plan, saved in its intent record."""

from __future__ import annotations

from ..protocol import Count, Plan


class DirectPlan(Plan, kw_only=True):
    """The files the job commits (reported by its committed attempts, each marked), the
    marked files of other attempts it deletes first, and how many markers it found."""

    files: list[str]
    stray: list[str]
    marked: Count


def plan_files(payload: DirectPlan) -> list[str]:
    """The files a decided plan commits (a table committer's plan extends this one's)."""
    return payload.files
