"""The main job, end to end, on the embedded engine (what `dataferry demo` runs), and the tour.

The main job generates synthetic sales data, writes it as a partitioned Parquet data set with 16
tasks, one attempt that dies after writing and one speculative duplicate, commits it, reads it
back with pyarrow and checks the row count. The tour then commits the same write with `v1` and
with `manifest` on a loaded NameNode's model (`sim:hdfs-loaded`) to show what the job commit
costs each, and runs a small shuffle pulled and pushed through two shuffle services.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.dataset as pads

from .commit.records.success import read_success
from .dataset.synthetic import sales_table
from .dataset.write import WriteResult, write_dataset
from .engine import AttemptFailure, LocalEngine, LocalEngineConfig
from .engine.local import EventHook
from .errors import DataferryError, DestinationError
from .extras import MissingDependency
from .store import Store, open_store


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
    commit_tour: list[dict[str, Any]] = field(default_factory=list)
    shuffle_tour: list[dict[str, Any]] = field(default_factory=list)
    # the demo's temporary directory (the default destination and the tour's output), or ""
    # once it has been removed
    workdir: str = ""

    @property
    def ok(self) -> bool:
        return self.rows_written == self.rows_read


def check_destination(dest: str, force: bool) -> Store:
    """The demo's destination; one that holds anything is refused unless `force` (the demo
    then replaces what it holds)."""
    store = open_store(dest)
    if store.exists("") and not force:
        if not store.stat("").is_dir:
            raise DestinationError(f"demo destination {store.full_url()} is a file")
        entries = store.list("")
        if entries:
            raise DestinationError(
                f"demo destination {store.full_url()} is not empty (it holds "
                f"{entries[0].path!r}{' and more' if len(entries) > 1 else ''}); "
                "--force replaces what it holds"
            )
    return store


def run_demo(
    dest: str | None = None,
    *,
    rows: int = 400_000,
    tasks: int = 16,
    committer: str = "auto",
    workers: int | None = None,
    on_event: EventHook | None = None,
    tour: bool = True,
    force: bool = False,
    keep: bool = False,
) -> DemoReport:
    """Run the main job into `dest` (default: a new temporary directory) and then the tour.

    A `dest` that holds anything is refused unless `force`. The temporary directory (the
    default destination and the tour's output) is removed at the end unless `keep`."""
    store = check_destination(dest, force) if dest else None
    workdir = tempfile.mkdtemp(prefix="dataferry-demo-")
    try:
        store = store or open_store(os.path.join(workdir, "sales"))
        report, table = _main_job(store, rows, tasks, committer, workers, on_event, force)
        if tour:
            report.commit_tour = commit_tour(table, tasks, os.path.join(workdir, "tour"))
            try:
                report.shuffle_tour = shuffle_tour(os.path.join(workdir, "tour", "shuffle"))
            except MissingDependency as e:  # a core install: the shuffle is an extra
                report.notes.append(f"shuffle tour skipped: {e}")
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    report.workdir = workdir if keep else ""
    return report


def _main_job(
    store: Store,
    rows: int,
    tasks: int,
    committer: str,
    workers: int | None,
    on_event: EventHook | None,
    force: bool,
) -> tuple[DemoReport, Any]:
    """The partitioned write with a failed and a speculative attempt, read back and checked."""
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
    result = write_dataset(
        table,
        store,
        partition_by=("day", "region"),
        committer=committer,
        engine=engine,
        mode="overwrite" if force else "error",
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
    report = DemoReport(
        dest=store.full_url(),
        committer=result.committer,
        rows_written=table.num_rows,
        rows_read=rows_read,
        write=result,
        success=marker.data.to_json() if marker and marker.data else None,
        generate_s=generate_s,
        read_s=read_s,
    )
    return report, table


def commit_tour(table: Any, tasks: int, base: str) -> list[dict[str, Any]]:
    """The same write (partitioned by day) committed by v1 and by manifest on sim:hdfs-loaded."""
    rows = []
    for name in ("v1", "manifest"):
        result = write_dataset(
            table,
            f"sim:hdfs-loaded:{base}/{name}",
            partition_by=("day",),
            committer=name,
            tasks=tasks,
        )
        rows.append(
            {
                "committer": name,
                "files": result.files,
                "job_commit_s": round(result.job_commit_s, 3),
                "stages_s": {k: round(v, 3) for k, v in result.run.commit.stage_seconds.items()},
            }
        )
    return rows


def shuffle_input(i: int, rows: int = 60_000) -> Any:
    """One map's input for the shuffle tour (generated in the map task)."""
    return sales_table(rows, seed=i)


def shuffle_tour(root: str, maps: int = 8, reduces: int = 16) -> list[dict[str, Any]]:
    """A small shuffle by customer, pulled and then pushed, on two node services."""
    import functools

    from .bench.shuffle import table_summary
    from .bench.shuffle_reads import ReduceReads
    from .engine.shuffle import LocalShuffle, LocalShuffleConfig
    from .shuffle import DriverConfig

    config = LocalShuffleConfig(nodes=2, workers=2, driver=DriverConfig(min_shuffle_size_to_wait=0))
    sources = [functools.partial(shuffle_input, i) for i in range(maps)]
    rows = []
    with LocalShuffle(config, root=root) as cluster:
        for push in (False, True):
            run = cluster.run(sources, ["customer"], reduces, push=push, reduce_fn=table_summary)
            # every read the reducers made: a block merged by reference (all of them on one
            # host) is still read from its map output, so push reads no fewer than pull here
            reads = ReduceReads.from_counters(run.stats.get("counters", {}), reduces)
            rows.append(
                {
                    "method": "push" if push else "pull",
                    "rows": sum(r["rows"] for r in run.results),
                    "wall_s": round(run.wall_s, 3),
                    "reduce_reads": reads.reads,
                    "merged_reads": reads.merged_reads,
                    "by_reference": reads.ref_reads,
                    "avg_read_bytes": reads.avg_read_bytes or 0,
                    "merged_partitions": run.finalize.get("merged_partitions", 0),
                }
            )
    return rows


def slowest_stage(stages_s: dict[str, float]) -> tuple[str, float]:
    """The job-commit stage that took longest (the `total` left out), as (name, seconds)."""
    stages = ((k, v) for k, v in stages_s.items() if k != "total")
    return max(stages, key=lambda kv: kv[1], default=("", 0.0))
