"""The Delta committer's plan (`DeltaPlan`, saved in the intent record): the table plan with
Delta's part, `DeltaTablePlan`."""

from __future__ import annotations

from ...protocol import NonEmpty, Plan
from ..plan import TablePlan


class DeltaTablePlan(Plan, kw_only=True, omit_defaults=True):
    """The job's application transaction id (`txn.appId`, how a landed commit is found),
    whether the commit creates the table, and the partition directories an
    `overwrite-partitions` replaces (absent in other modes' records)."""

    app_id: NonEmpty
    created: bool
    partitions: list[str] = []


class DeltaPlan(TablePlan, kw_only=True):
    """A Delta job's plan: the table plan, `table` Delta's."""

    table: DeltaTablePlan
