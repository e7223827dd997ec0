"""`dataferry bench shuffle`: the same data shuffled by pull, push (merged), Dask p2p and Dask's
task-based shuffle, on a Dask LocalCluster and on the embedded engine, in one run.

Generation counts in no method's time: on Dask the input is generated and persisted first; on
the embedded engine each map's input is written to an Arrow file first and read by its map task
(a read every method of that engine pays alike). Reported per method: wall time, MB/s,
reduce-side read requests and their average size (for our shuffles; Dask's own read local
files), and the machine's sequential disk write bandwidth, measured in the same run, as the
limit.
"""

from __future__ import annotations

import functools
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..shuffle import DriverConfig
from .machine import disk_write_mb_s, machine_info

ROW_BYTES = 8 * 7  # a key and six float64 values
METHODS = ("pull", "push", "dask-p2p", "dask-tasks")
ENGINES = ("dask", "local")

_UNITS = {
    "": 1,
    "b": 1,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
}


def parse_size(text: str) -> int:
    """'1GiB', '256MiB', '500MB', '1048576' -> bytes."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ConfigError(f"size {text!r}: expected a number with KiB, MiB, GiB, KB, MB or GB")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


@dataclass(frozen=True)
class ShuffleBenchSpec:
    size: int = 2**30
    maps: int = 100
    reduces: int = 200
    workers: int = 2
    repeats: int = 1
    engines: tuple[str, ...] = ENGINES

    def __post_init__(self) -> None:
        if self.maps < 1 or self.reduces < 1 or self.size < self.maps * ROW_BYTES:
            raise ConfigError("need --maps >= 1, --reduces >= 1 and at least one row per map")
        bad = set(self.engines) - set(ENGINES)
        if bad:
            raise ConfigError(f"unknown engines {sorted(bad)}; choose from {ENGINES}")

    @property
    def rows_per_map(self) -> int:
        return self.size // self.maps // ROW_BYTES


def generate(map_index: int, rows: int) -> pa.Table:
    rng = np.random.default_rng(map_index)
    columns = {"key": rng.integers(0, 2**62, rows)}
    for c in "abcdef":
        columns[c] = rng.random(rows)
    return pa.table(columns)


def generate_pandas(map_index: int, rows: int) -> Any:
    return generate(map_index, rows).to_pandas()


def read_table(path: str) -> pa.Table:
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).read_all()


def _row(method: str, engine: str, spec: ShuffleBenchSpec, runs: list[dict[str, Any]]) -> dict:
    wall = statistics.median(r["wall_s"] for r in runs)
    reads = runs[0].get("reduce_reads")
    read_bytes = runs[0].get("reduce_read_bytes")
    return {
        "method": method,
        "engine": engine,
        "wall_s": round(wall, 3),
        "runs_s": [round(r["wall_s"], 3) for r in runs],
        "mb_s": round(spec.size / wall / 1e6, 1),
        "reduce_reads": reads,
        "avg_read_bytes": round(read_bytes / reads) if reads else None,
        "merged_partitions": runs[0].get("merged_partitions"),
        "rows": runs[0]["rows"],
    }


def table_summary(table: pa.Table) -> dict[str, int]:
    """What a benchmark's (or the demo's) reduce task returns instead of its table: its row
    count, so the shuffled data is not sent back to the driver."""
    return {"rows": table.num_rows}


def run_local(spec: ShuffleBenchSpec, work: str, tick: Callable[[str], None]) -> list[dict]:
    from ..engine.shuffle import LocalShuffle, LocalShuffleConfig

    sources = []
    for i in range(spec.maps):
        path = f"{work}/input-{i}.arrow"
        table = generate(i, spec.rows_per_map)
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        sources.append(functools.partial(read_table, path))
    cfg = LocalShuffleConfig(
        nodes=spec.workers,
        workers=spec.workers,
        driver=DriverConfig(min_shuffle_size_to_wait=0),
    )
    runs: dict[str, list[dict[str, Any]]] = {"pull": [], "push": []}
    with LocalShuffle(cfg, root=f"{work}/nodes") as cluster:
        for _ in range(spec.repeats):
            for method in runs:
                run = cluster.run(
                    sources, ["key"], spec.reduces, push=method == "push", reduce_fn=table_summary
                )
                runs[method].append(
                    {
                        "wall_s": run.wall_s,
                        "reduce_reads": run.counter("reduce_reads"),
                        "reduce_read_bytes": run.counter("reduce_read_bytes"),
                        "merged_partitions": run.finalize.get("merged_partitions", 0),
                        "rows": sum(r["rows"] for r in run.results),
                        "stages": run.stages,
                    }
                )
                tick(f"local {method}")
    return [_row(m, "local", spec, r) for m, r in runs.items()]


def run_dask(spec: ShuffleBenchSpec, tick: Callable[[str], None]) -> list[dict]:
    import dask
    import dask.dataframe as dd
    import distributed

    from ..engine.dask_shuffle import DaskShuffleReport, remove_shuffles, shuffle

    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in METHODS}
    with (
        dask.config.set({"distributed.worker.memory.target": False}),
        distributed.LocalCluster(
            n_workers=spec.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        ) as lc,
        distributed.Client(lc) as client,
    ):
        meta = generate_pandas(0, 0)
        ddf = dd.from_map(
            generate_pandas, range(spec.maps), rows=spec.rows_per_map, meta=meta
        ).persist()
        distributed.wait(ddf)
        for _ in range(spec.repeats):
            for method in METHODS:
                report = DaskShuffleReport(False, 0, 0)
                started = time.perf_counter()
                if method in ("pull", "push"):
                    out = shuffle(
                        ddf,
                        "key",
                        spec.reduces,
                        push=method == "push",
                        client=client,
                        driver_config=DriverConfig(min_shuffle_size_to_wait=0),
                        report=report,
                    ).persist()  # lazy: persisting runs the shuffle
                    distributed.wait(out)
                else:
                    out = ddf.shuffle(
                        "key", npartitions=spec.reduces, shuffle_method=method[5:]
                    ).persist()
                    distributed.wait(out)
                wall = time.perf_counter() - started
                rows = int(out.map_partitions(len).sum().compute())
                runs[method].append(
                    {
                        "wall_s": wall,
                        "reduce_reads": report.reduce_reads or None,
                        "reduce_read_bytes": report.reduce_read_bytes or None,
                        "merged_partitions": report.finalize.get("merged_partitions"),
                        "rows": rows,
                    }
                )
                del out
                remove_shuffles(client)  # the shuffle's files, before the next run
                tick(f"dask {method}")
    return [_row(m, "dask", spec, r) for m, r in runs.items()]


def run_shuffle_bench(
    spec: ShuffleBenchSpec, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    tick = progress or (lambda _m: None)
    work = tempfile.mkdtemp(prefix="dataferry-bench-shuffle-")
    try:
        disk = disk_write_mb_s(work)
        results: list[dict[str, Any]] = []
        if "dask" in spec.engines:
            results += run_dask(spec, tick)
        if "local" in spec.engines:
            results += run_local(spec, work, tick)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    expected_rows = spec.rows_per_map * spec.maps
    for r in results:
        if r["rows"] != expected_rows:
            raise ConfigError(f"{r['engine']} {r['method']} returned {r['rows']} rows")
    limit_s = spec.size / (disk * 1e6)
    by = {(r["engine"], r["method"]): r for r in results}
    summary: dict[str, Any] = {}
    for engine in spec.engines:
        pull, push = by.get((engine, "pull")), by.get((engine, "push"))
        if pull and push and push["reduce_reads"]:
            summary[f"{engine}_read_reduction"] = round(
                pull["reduce_reads"] / push["reduce_reads"], 1
            )
        if push:
            summary[f"{engine}_push_vs_disk_limit"] = round(push["wall_s"] / limit_s, 2)
    if ("dask", "push") in by and ("dask", "dask-p2p") in by:
        summary["dask_push_vs_p2p"] = round(
            by[("dask", "push")]["wall_s"] / by[("dask", "dask-p2p")]["wall_s"], 2
        )
    return {
        "spec": {
            "size": spec.size,
            "maps": spec.maps,
            "reduces": spec.reduces,
            "workers": spec.workers,
            "repeats": spec.repeats,
            "rows": expected_rows,
            "avg_block_bytes": spec.size // (spec.maps * spec.reduces),
        },
        "machine": machine_info(),
        "disk_mb_s": round(disk, 1),
        "disk_limit_s": round(limit_s, 2),
        "results": results,
        "summary": summary,
    }
