"""The main job, end to end, on the embedded engine (what `dataferry demo` runs).

Generates synthetic sales data, writes it as a partitioned Parquet data set with 16 tasks, one
attempt that dies after writing and one speculative duplicate, commits it, reads it back with
pyarrow and checks the row count.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.dataset as pads

from .commit.success import read_success
from .dataset.synthetic import sales_table
from .dataset.write import WriteResult, write_dataset
from .engine import AttemptFailure, LocalEngine, LocalEngineConfig
from .engine.local import EventHook
from .errors import DataferryError
from .store import open_store


@dataclass
class DemoReport:
    dest: str
    committer: str
    rows_written: int
    rows_read: int
    write: WriteResult
    success: dict[str, Any] | None
    generate_s: float
    read_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.rows_written == self.rows_read


def run_demo(
    dest: str | None = None,
    *,
    rows: int = 400_000,
    tasks: int = 16,
    committer: str = "auto",
    workers: int | None = None,
    on_event: EventHook | None = None,
) -> DemoReport:
    dest = dest or tempfile.mkdtemp(prefix="dataferry-demo-")
    t = time.perf_counter()
    table = sales_table(rows)
    generate_s = time.perf_counter() - t
    engine = LocalEngine(
        LocalEngineConfig(
            workers=workers,
            failures=(AttemptFailure(task=3, attempt=0, when="after_write"),),
            speculate_tasks=(5,),
        )
    )
    store = open_store(dest)
    result = write_dataset(
        table,
        store,
        partition_by=("day", "region"),
        committer=committer,
        engine=engine,
        mode="overwrite",
        tasks=tasks,
        on_event=on_event,
    )
    t = time.perf_counter()
    local_root = getattr(store, "root", None)
    rows_read = -1
    if local_root:
        rows_read = pads.dataset(local_root, format="parquet", partitioning="hive").count_rows()
    read_s = time.perf_counter() - t
    marker = read_success(store)
    if rows_read != table.num_rows:
        raise DataferryError(
            f"demo read back {rows_read} rows from {store.full_url()}, wrote {table.num_rows}"
        )
    return DemoReport(
        dest=store.full_url(),
        committer=result.committer,
        rows_written=table.num_rows,
        rows_read=rows_read,
        write=result,
        success=marker.data.to_json() if marker and marker.data else None,
        generate_s=generate_s,
        read_s=read_s,
    )
