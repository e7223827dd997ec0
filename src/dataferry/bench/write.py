"""`dataferry bench write`: dataferry beside the writers users pick, in one run.

Table mode (the default): the same generated table (`sales_table`), partitioned by day and
region, written in this process by `dataferry.write_dataset` (its defaults; and the manifest
committer), `pyarrow.dataset.write_dataset`, polars `DataFrame.write_parquet(partition_by=...)`,
DuckDB `COPY ... (FORMAT parquet, PARTITION_BY (...))` and Delta Lake `write_deltalake`. With
`dask`, `dask.dataframe.to_parquet(partition_on=...)` against dataferry's Dask writer on a
LocalCluster; with `ray`, Ray Data's `write_parquet(partition_cols=...)` against
`write_datasink(dataferry.ray.CommitDatasink(...))`. A writer whose library is not installed is
skipped and listed. Runs alternate (the order rotates each round) and medians are compared with
the dataferry writer of the same group. Each writer's output is read back once: the rows must
all be there, or the writer is listed as failed and not timed further.

Stream mode (`StreamBenchSpec`): a stream of RecordBatches made on the fly (derived from a
pool of batches generated before the clock starts: `write_stream.BatchPool`), of a given
in-memory size, into N partitions; each writer runs alone in a fresh process (see
`write_stream`), which reports its wall time and its peak RSS (the process's kernel high-water
mark, VmHWM, plus its descendants' RSS sampled with psutil), then the files are read back.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any

from ..dataset.synthetic import sales_table
from ..errors import ConfigError
from .machine import machine_info
from .measure import Progress, _failure, _measure, _median_row, _ratios, _slug, _Steps
from .table_writers import DEFAULT_CODECS, Codec, parse_codec, table_group
from .writers import (
    DEFAULT_CODEC,
    Group,
    Output,
    dask_group,
    dataferry_keywords,
    delta_rows,
    inspect_output,
    missing,
    ray_group,
)

RSS_METHOD = (
    "peak RSS = the writer's process's kernel high-water mark (VmHWM, /proc/self/status) "
    "+ its descendants' total RSS sampled with psutil every 0.1 s during the write; "
    "start = the high-water mark after imports and setup, before the write"
)
TABLE_WRITERS = ("dataferry", "dataferry manifest", "pyarrow", "polars", "duckdb", "deltalake")
BENCH_CODECS = ("default", "snappy", "zstd-3")
DASK_WRITERS = ("dask", "dataferry.dask")
RAY_WRITERS = ("ray", "dataferry.ray")


@dataclass(frozen=True)
class WriteBenchSpec:
    rows: int = 3_000_000
    tasks: int | None = None  # write_dataset's default
    repeats: int = 5
    writers: tuple[str, ...] = ()  # only these; () for every installed one
    dask: bool = False
    ray: bool = False
    blocks: int = 8  # Dask partitions, Ray blocks
    workers: int = 2  # Dask workers, Ray CPUs
    partition_by: tuple[str, ...] = ("day", "region")
    # the in-process writers run at each: their own defaults, and codecs all are told to use
    codecs: tuple[str, ...] = BENCH_CODECS

    def __post_init__(self) -> None:
        for name in ("rows", "repeats", "blocks", "workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} must be >= 1, got {getattr(self, name)}")
        _check_names(self.writers, TABLE_WRITERS + DASK_WRITERS + RAY_WRITERS)
        if not self.codecs:
            raise ConfigError("--codecs: give at least one (default, snappy, zstd-3, ...)")
        labels = [parse_codec(c).label for c in self.codecs]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"--codecs: {', '.join(self.codecs)} names one codec twice")

    @property
    def parsed_codecs(self) -> tuple[Codec, ...]:
        return tuple(parse_codec(c) for c in self.codecs)


@dataclass(frozen=True)
class StreamBenchSpec:
    size: int = 2**30  # in-memory bytes of the whole stream
    partitions: int = 40
    batch_rows: int = 65_536
    repeats: int = 1
    max_memory: int | None = None  # passed to write_dataset when it takes it
    writers: tuple[str, ...] = ()
    workers: int = 2  # the Dask writers' LocalCluster
    timeout_s: float = 3600.0  # for one writer's process

    def __post_init__(self) -> None:
        for name in ("size", "partitions", "batch_rows", "repeats", "workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1")
        from .write_stream import STREAM_WRITERS

        _check_names(self.writers, tuple(STREAM_WRITERS))


def _check_names(names: tuple[str, ...], known: tuple[str, ...]) -> None:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"unknown writers {unknown}; choose from {', '.join(known)}")


def run_write_bench(spec: WriteBenchSpec, progress: Progress | None = None) -> dict[str, Any]:
    only = spec.writers
    table = sales_table(spec.rows)
    plan: list[tuple[str, Callable[[], AbstractContextManager[Group]]]] = [
        (
            "table",
            lambda: nullcontext(
                table_group(table, spec.partition_by, spec.tasks, only, spec.parsed_codecs)
            ),
        )
    ]
    if spec.dask:
        plan.append(
            ("dask", lambda: dask_group(table, spec.partition_by, spec.blocks, spec.workers, only))
        )
    if spec.ray:
        plan.append(
            ("ray", lambda: ray_group(table, spec.partition_by, spec.blocks, spec.workers, only))
        )
    at_codecs = len(spec.codecs) - (DEFAULT_CODEC in spec.codecs)  # no manifest run at these
    planned = {
        "table": len([n for n in TABLE_WRITERS if not only or n in only]) * len(spec.codecs)
        - at_codecs * ("dataferry manifest" in (only or TABLE_WRITERS)),
        "dask": len([n for n in DASK_WRITERS if not only or n in only]),
        "ray": len([n for n in RAY_WRITERS if not only or n in only]),
    }
    # every writer is warmed up once (imports, caches, the first call's costs), then timed
    total = sum(planned[g] * (spec.repeats + 1) + (g != "table") for g, _ in plan)
    skipped: list[dict[str, str]] = [
        {"writer": n, "group": g, "reason": f"needs --{g}"}
        for g, names, wanted in (("dask", DASK_WRITERS, spec.dask), ("ray", RAY_WRITERS, spec.ray))
        for n in names
        if n in only and not wanted
    ]
    steps = _Steps(progress, total)
    results: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    notes: list[str] = []
    baselines: dict[str, str] = {}
    base = tempfile.mkdtemp(prefix="dataferry-bench-write-")
    try:
        for name, open_group in plan:
            if name != "table":
                steps(f"{name}: starting the cluster, loading the table")
            try:
                with open_group() as group:
                    baselines[group.name] = group.baseline
                    skipped += [{**s, "group": group.name} for s in group.skipped]
                    notes += group.notes
                    steps.drop((planned[name] - len(group.writers)) * (spec.repeats + 1))
                    results += _measure(
                        group, table.num_rows, spec.repeats, base, steps, failed, warmup=True
                    )
            except Exception as e:  # the cluster would not start, or not stop
                failed.append(_failure(f"{name} (cluster)", name, e))
                steps.drop(planned[name] * (spec.repeats + 1))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    _ratios(results, baselines)
    if any(r["group"] == "table" for r in results):
        notes.append(
            "codec default: each writer's own ("
            + "; ".join(f"{w} {c}" for w, c in DEFAULT_CODECS.items())
            + "); every other codec: all writers told to use it (and its level)"
        )
    walls = {
        r["writer"]: r["wall_s"]
        for r in results
        if r["group"] == "table" and r["codec"] == DEFAULT_CODEC
    }
    ratio = (
        round(walls["dataferry"] / walls["pyarrow"], 3)
        if walls.get("dataferry") and walls.get("pyarrow")
        else None
    )
    return {
        "benchmark": "write",
        "mode": "table",
        "spec": {**asdict(spec), "bytes": table.nbytes},
        "machine": machine_info(),
        "results": results,
        "skipped": skipped,
        "failed": failed,
        "notes": notes,
        "ratio": ratio,  # dataferry over pyarrow writing straight in: the cost of safety
    }


# --- stream mode --------------------------------------------------------------------------------


def _stream_writers(spec: StreamBenchSpec) -> tuple[list[str], list[dict[str, str]], list[str]]:
    """(writers to run, skipped, notes)."""
    from .write_stream import STREAM_WRITERS

    run, skipped, notes = [], [], []
    for name, w in STREAM_WRITERS.items():
        if spec.writers and name not in spec.writers:
            continue
        why = None
        if absent := missing(w.modules):
            why = f"{absent} is not installed"
        elif name == "dataferry.dask" and not hasattr(
            importlib.import_module("dataferry.dask"), "to_parquet"
        ):
            why = "dataferry.dask.to_parquet does not exist in this version"
        if why:
            skipped.append({"writer": name, "group": "stream", "reason": why})
        else:
            run.append(name)
    if "dataferry" in run:
        passed = dataferry_keywords(max_memory=spec.max_memory)
        if spec.max_memory is not None and not passed:
            notes.append("dataferry: write_dataset takes no max_memory here; not passed")
        elif passed:
            notes.append(f"dataferry: max_memory={spec.max_memory:,} bytes")
    if any(STREAM_WRITERS[n].cluster for n in run):
        notes.append(
            f"dask: LocalCluster in the writer's process, {spec.workers} workers x 1 thread, "
            "processes=False (its memory is the process's own)"
        )
    return run, skipped, notes


def _child_env() -> dict[str, str]:
    import dataferry

    src = os.path.dirname(os.path.dirname(os.path.abspath(dataferry.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def run_child(args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """One writer in a fresh `python -m dataferry.bench.write_stream` process."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "dataferry.bench.write_stream", json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=_child_env(),
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise RuntimeError(tail[0])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - started
    return result


def run_stream_bench(spec: StreamBenchSpec, progress: Progress | None = None) -> dict[str, Any]:
    from .write_stream import STREAM_WRITERS, shape_for

    shape = shape_for(spec.size, spec.partitions, spec.batch_rows)
    names, skipped, notes = _stream_writers(spec)
    steps = _Steps(progress, len(names) * spec.repeats)
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    outputs: dict[str, Output] = {}
    failed: list[dict[str, str]] = []
    alive = list(names)
    options = {"max_memory": spec.max_memory}
    base = tempfile.mkdtemp(prefix="dataferry-bench-stream-")
    try:
        for rep in range(spec.repeats):
            turn = rep % max(1, len(alive))
            for name in alive[turn:] + alive[:turn]:
                steps(f"stream: {name}, run {rep + 1} of {spec.repeats} (own process)")
                dest = os.path.join(base, f"{_slug(name)}-{rep}")
                os.sync()
                args = {
                    "writer": name,
                    "dest": dest,
                    "shape": asdict(shape),
                    "options": options,
                    "workers": spec.workers,
                }
                try:
                    child = run_child(args, spec.timeout_s)
                    if name not in outputs and STREAM_WRITERS[name].floor:
                        outputs[name] = Output(0, 0, (), 0, shape.rows)  # (writes nothing)
                    if name not in outputs:
                        rows = delta_rows if STREAM_WRITERS[name].delta else None
                        out = inspect_output(dest, rows)
                        if out.rows != shape.rows:
                            raise ConfigError(f"read back {out.rows:,} rows of {shape.rows:,}")
                        outputs[name] = out
                    runs[name].append(child)
                except Exception as e:
                    failed.append(_failure(name, "stream", e))
                    alive.remove(name)
                    steps.drop(spec.repeats - rep - 1)
                finally:
                    shutil.rmtree(dest, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    results = []
    for name in alive:
        rs = runs[name]
        row = _median_row(
            name, "stream", [r["wall_s"] for r in rs], outputs[name], rs[0].get("detail")
        )
        peak = [r["rss_self_bytes"] + (r["rss_children_bytes"] or 0) for r in rs]
        children = [r["rss_children_bytes"] for r in rs if r["rss_children_bytes"] is not None]
        row.update(
            rss_peak_bytes=int(statistics.median(peak)),
            rss_self_bytes=int(statistics.median(r["rss_self_bytes"] for r in rs)),
            rss_children_bytes=int(statistics.median(children)) if children else None,
            rss_start_bytes=int(statistics.median(r["rss_start_bytes"] for r in rs)),
            process_s=round(statistics.median(r["process_s"] for r in rs), 3),
        )
        results.append(row)
    _ratios(results, {"stream": "dataferry"})
    return {
        "benchmark": "write",
        "mode": "stream",
        "spec": {
            **asdict(spec),
            "batches": shape.batches,
            "rows": shape.rows,
            "bytes": shape.batches * shape.batch_bytes,
            "partition_by": ["day"],
            "dask_partitions": shape.dask_partitions,
        },
        "machine": machine_info(),
        "rss_method": RSS_METHOD,
        "results": results,
        "skipped": skipped,
        "failed": failed,
        "notes": notes,
    }
