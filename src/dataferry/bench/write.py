"""`dataferry bench write`: the cost of safety.

The same generated data set, partitioned Parquet, written in one run by
`dataferry.write_dataset` (manifest committer, embedded engine, defaults) and by
`pyarrow.dataset.write_dataset` straight into the destination, which is what Python users do
today (no commit protocol at all). Runs alternate and medians are compared.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from ..dataset.synthetic import sales_table
from ..dataset.write import write_dataset
from .machine import machine_info


@dataclass(frozen=True)
class WriteBenchSpec:
    rows: int = 3_000_000
    tasks: int | None = None  # write_dataset's default
    repeats: int = 5


def _pyarrow_write(table: Any, dest: str) -> None:
    import pyarrow.dataset as pads

    pads.write_dataset(
        table,
        dest,
        format="parquet",
        partitioning=["day", "region"],
        partitioning_flavor="hive",
        existing_data_behavior="overwrite_or_ignore",
    )


def run_write_bench(spec: WriteBenchSpec, progress: Any = None) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    table = sales_table(spec.rows)
    base = tempfile.mkdtemp(prefix="dataferry-bench-write-")
    times: dict[str, list[float]] = {"pyarrow": [], "dataferry": []}
    try:
        for rep in range(spec.repeats):
            say(f"run {rep + 1}")
            os.sync()  # each run starts with no dirty pages left by the one before
            t = time.perf_counter()
            _pyarrow_write(table, f"{base}/pyarrow-{rep}")
            times["pyarrow"].append(time.perf_counter() - t)
            os.sync()
            t = time.perf_counter()
            write_dataset(
                table,
                f"{base}/dataferry-{rep}",
                partition_by=("day", "region"),
                committer="manifest",
                tasks=spec.tasks,
            )
            times["dataferry"].append(time.perf_counter() - t)
            shutil.rmtree(f"{base}/pyarrow-{rep}", ignore_errors=True)
            shutil.rmtree(f"{base}/dataferry-{rep}", ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "benchmark": "write",
        "spec": spec.__dict__,
        "machine": machine_info(),
        "results": [
            {"writer": k, "wall_s": round(med[k], 3), "runs_s": [round(x, 3) for x in times[k]]}
            for k in ("pyarrow", "dataferry")
        ],
        "ratio": round(med["dataferry"] / med["pyarrow"], 3),
    }
