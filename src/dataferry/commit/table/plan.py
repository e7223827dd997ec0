"""The table committers' plan, saved in the intent record: direct's (the files, the strays,
the markers found) and what the table's transaction is made from (each file's footer facts,
the schema, the partition columns and the format's own part, `table`).

Each format declares its plan type, a `TablePlan` whose `table` is the format's own struct
(`delta/plan.py`, `iceberg/plan.py`, `hudi/plan.py`); recovery decodes a record as that type
with strict types, so a damaged field is refused naming the record and the field. The field
names are those of the records of earlier versions (a dict then), which still load.
"""

from __future__ import annotations

from typing import Any

from ..direct.plan import DirectPlan
from .footers import FileFacts


class TablePlan(DirectPlan, kw_only=True):
    """Direct's plan and the table's: each committed file's facts (`footers.FileFacts`, in
    the plan's file order), the data's schema as text ("": none known, a job that wrote
    nothing), the partition columns, and the format's part (`table`, a struct per format)."""

    facts: list[FileFacts]
    schema: str = ""
    partition_by: list[str]
    table: dict[str, Any] = {}  # a format without a plan of its own; each format's is a struct
