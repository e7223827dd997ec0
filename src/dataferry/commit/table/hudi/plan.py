"""The Hudi committer's plan (`HudiPlan`, saved in the intent record): the table plan with
Hudi's part, `HudiTablePlan`."""

from __future__ import annotations

from ...protocol import Count, NonEmpty, Plan
from ..plan import TablePlan


class SliceFacts(Plan, kw_only=True):
    """What the commit metadata says of a file group's new slice (an upsert's): the base
    file it was merged from and how many of its rows are new versions."""

    prev_path: NonEmpty
    updates: Count


class HudiTablePlan(Plan, kw_only=True):
    """The job's instant, its action (`commit`, or `replacecommit` for an insert overwrite:
    records of early versions have none) and write operation; for a `replacecommit` the
    partitions written (None: the whole table) and the file ids it replaces; for an upsert
    the new slices of the file groups it updates, by base file."""

    instant: NonEmpty
    action: str = "commit"
    operation: NonEmpty
    partitions: list[str] | None = None
    replaced: dict[str, list[str]] | None = None
    slices: dict[str, SliceFacts] = {}


class HudiPlan(TablePlan, kw_only=True):
    """A Hudi job's plan: the table plan, `table` Hudi's."""

    table: HudiTablePlan
