"""The Iceberg committer's plan (`IcebergPlan`, saved in the intent record): the table plan
with Iceberg's part, `IcebergTablePlan`."""

from __future__ import annotations

from typing import Any

from ...protocol import NonEmpty, Plan
from ..plan import TablePlan


class IcebergWhere(Plan, kw_only=True):
    """Where the table is: the catalog's properties without its secrets (None: the embedded
    catalog in the table's location) and the table's identifier ("namespace.table")."""

    catalog: dict[str, Any] | None
    identifier: NonEmpty

    def of(self, config: Any) -> dict[str, Any]:
        """Where the intent's table is for a committer with `config` (an `IcebergConfig`): the
        options' catalog when given (with its secrets), else the one recorded here (as a
        committer with default options rebuilds it)."""
        given = config.catalog is not None
        catalog = config.catalog_properties if given else self.catalog
        return {"catalog": catalog, "identifier": self.identifier}


class IcebergTablePlan(Plan, kw_only=True):
    """Where the table is, whether the commit creates it, and the snapshot the job read
    (None: there was no table)."""

    where: IcebergWhere
    created: bool
    read_snapshot_id: int | None = None


class IcebergPlan(TablePlan, kw_only=True):
    """An Iceberg job's plan: the table plan, `table` Iceberg's."""

    table: IcebergTablePlan
