"""The load journal: every move a load will make, planned before it moves anything.

It is the heart of the job's plan (`HivePlan`), saved in its intent record. Steps are idempotent
moves: a step whose source is gone and whose destination exists is done; one whose source
exists is still to do. So a load that stopped anywhere can be completed by running the journal
again, or rolled back by running its steps backwards. Hive's own load can do neither.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from ..protocol import Count, NonEmpty, Plan

Phase = Literal["aside", "in"]
PHASES = ("aside", "in")


class Step(msgspec.Struct, frozen=True):
    """Move `src` to `dst` (a directory rename if `directory`, else one file)."""

    phase: Phase
    src: NonEmpty
    dst: NonEmpty
    directory: bool = False


class Journal(msgspec.Struct, frozen=True, kw_only=True):
    """Every move of the load, in order, and the partitions it registers."""

    job_id: str
    mode: NonEmpty
    table: str
    partitions: list[str] = []
    steps: list[Step]


class HivePlan(Plan, kw_only=True):
    """Hive's plan: the load's journal, the catalog it registers the partitions in ("" for
    none) and how many files the inner commit staged."""

    journal: Journal
    catalog: str
    files: Count
