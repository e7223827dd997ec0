"""How `dataferry bench write` times its writers: each warmed up, then run in rotated order,
each run's wall and process CPU seconds kept, medians, spread and cores busy reported, and
ratios to the group's dataferry writer at the same codec."""

from __future__ import annotations

import importlib
import os
import re
import resource
import shutil
import statistics
import time
from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from .writers import DEFAULT_CODEC, Group, Output, Writer, inspect_output

# (label of what is about to run, its step number from 1, steps in all: may shrink as writers
# are found missing or fail)
Progress = Callable[[str, int, int], None]


class _Steps:
    """Counts the steps for the progress callback; `drop` takes planned steps off."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress = progress or (lambda _l, _k, _n: None)
        self.done = 0
        self.total = total

    def __call__(self, label: str) -> None:
        self.done += 1
        self.total = max(self.total, self.done)
        self.progress(label, self.done, self.total)

    def drop(self, n: int) -> None:
        self.total = max(self.done, self.total - n)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name)


def _median_row(
    writer: str,
    group: str,
    runs: list[float],
    output: Output,
    detail: Any,
    run_details: list[Any] | None = None,
    cpu: list[float] | None = None,
    codec: str = DEFAULT_CODEC,
) -> dict[str, Any]:
    median = statistics.median(runs)
    row = {
        "writer": writer,
        "group": group,
        "codec": codec,
        "wall_s": round(median, 4),
        "runs_s": [round(r, 4) for r in runs],
        # (slowest - fastest) run, and that over the median: how far one run can be trusted
        "spread_s": round(max(runs) - min(runs), 4),
        "spread_pct": round(100 * (max(runs) - min(runs)) / median, 1) if median else 0.0,
        "files": output.files,
        "bytes": output.bytes,
        "file_bytes": output.size_stats(),
        "partitions": output.partitions,
        "rows": output.rows,
        "detail": detail,
    }
    if run_details is not None:
        row["run_details"] = run_details  # each timed run's detail, in the order of runs_s
    if cpu:
        # the process's CPU seconds (every thread) of each run, and the cores it kept busy:
        # CPU seconds over wall seconds, the median of the runs'
        row["cpu_s"] = round(statistics.median(cpu), 4)
        row["cpu_runs_s"] = [round(c, 4) for c in cpu]
        row["cores"] = round(
            statistics.median(c / w for c, w in zip(cpu, runs, strict=True) if w), 2
        )
    return row


def _process_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _ratios(results: list[dict[str, Any]], baselines: dict[str, str]) -> None:
    """vs_dataferry: each writer's median over its group's dataferry writer's at the same
    codec."""
    walls = {(r["group"], r.get("codec"), r["writer"]): r["wall_s"] for r in results}
    for r in results:
        base = walls.get((r["group"], r.get("codec"), baselines.get(r["group"], "")))
        r["baseline"] = baselines.get(r["group"])
        r["vs_dataferry"] = round(r["wall_s"] / base, 3) if base else None


def _failure(writer: str, group: str, error: BaseException | str) -> dict[str, str]:
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {"writer": writer, "group": group, "reason": text.strip()[:500]}


# --- table mode ---------------------------------------------------------------------------------


def _measure(
    group: Group,
    expected_rows: int,
    repeats: int,
    base: str,
    steps: _Steps,
    failed: list[dict[str, str]],
    warmup: bool = False,
) -> list[dict[str, Any]]:
    """Each writer of the group `repeats` times, the order rotated each round; with `warmup`,
    once more before the timed runs (not timed: what a first call pays, caches and imports,
    is left out). The first write of each writer is read back: all rows, or it failed."""
    alive: list[Writer] = []
    inputs: dict[str, Any] = {}
    for w in group.writers:
        try:
            for module in w.warm:
                importlib.import_module(module)
            inputs[w.key] = w.prepare(group.data) if w.prepare else group.data
            alive.append(w)
        except Exception as e:
            failed.append(_failure(w.key, group.name, e))
            steps.drop(repeats + warmup)
    runs: dict[str, list[float]] = {w.key: [] for w in alive}
    cpus: dict[str, list[float]] = {w.key: [] for w in alive}
    run_details: dict[str, list[Any]] = {w.key: [] for w in alive}
    outputs: dict[str, Output] = {}
    details: dict[str, Any] = {}

    def run(w: Writer, label: str, dest: str, left: int) -> tuple[float, Any, float] | None:
        steps(f"{group.name}: {w.key}, {label}")
        os.sync()  # each run starts with no dirty pages left by the one before
        try:
            cpu = _process_cpu()
            started = time.perf_counter()
            detail = w.write(inputs[w.key], dest)
            wall = time.perf_counter() - started
            cpu = _process_cpu() - cpu
            if w.key not in outputs:  # read back once: nobody is timed doing nothing
                out = inspect_output(dest, w.rows)
                if out.rows != expected_rows:
                    raise ConfigError(f"read back {out.rows:,} rows of {expected_rows:,}")
                outputs[w.key], details[w.key] = out, detail
            return wall, detail, cpu
        except Exception as e:
            failed.append(_failure(w.key, group.name, e))
            alive.remove(w)
            steps.drop(left)
            return None
        finally:
            shutil.rmtree(dest, ignore_errors=True)

    try:
        if warmup:
            for w in list(alive):
                run(w, "warm-up", os.path.join(base, f"{group.name}-{_slug(w.key)}-warm"), repeats)
        for rep in range(repeats):
            turn = rep % max(1, len(alive))
            for w in alive[turn:] + alive[:turn]:  # rotated: no writer always runs first
                if w not in alive:
                    continue
                dest = os.path.join(base, f"{group.name}-{_slug(w.key)}-{rep}")
                done = run(w, f"run {rep + 1} of {repeats}", dest, repeats - rep - 1)
                if done is not None:
                    runs[w.key].append(done[0])
                    run_details[w.key].append(done[1])
                    cpus[w.key].append(done[2])
    finally:
        for w in group.writers:
            if w.close and w.key in inputs:
                w.close(inputs[w.key])
    return [
        _median_row(
            w.name,
            group.name,
            runs[w.key],
            outputs[w.key],
            details[w.key],
            run_details[w.key],
            cpus[w.key],
            w.codec,
        )
        for w in alive
    ]
