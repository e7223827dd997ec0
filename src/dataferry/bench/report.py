"""`dataferry bench report`: run the benchmark suite at a size that finishes in a few minutes on
two cores and write `docs/benchmarks.md` with its tables and plots (PNG, matplotlib), and the
raw results as JSON beside them. Every number in the page comes from this run.

Sections (each a stage with its own results): `commit` (job commit time against files, per
committer and store model), `plan` (the planner's prediction against measured runs at 10k
files, and its table up to 1M files), `markers`, `shuffle`, `write` (the cost of safety).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from ..store import LocalStore
from ..store.s3_local import LocalS3Server
from .commit import CommitBenchSpec, run_commit_bench
from .machine import machine_info
from .markers import MarkersBenchSpec, run_markers_bench
from .plan import PlanSpec, calibrate, predict
from .shuffle import ShuffleBenchSpec, run_shuffle_bench
from .write import WriteBenchSpec, run_write_bench

Progress = Callable[[str], None]

# a real S3-protocol server on loopback (moto, its own process), for the committers that
# need the S3 API itself
S3_SERVER = "s3 server (moto)"


@dataclass(frozen=True)
class ReportSpec:
    """What the report runs. `quick` shrinks everything to seconds (for tests)."""

    out: str = "docs/benchmarks"
    quick: bool = False

    @property
    def commit_sweep(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """store model -> committer -> file counts measured."""
        if self.quick:
            return {
                "sim:hdfs": {"v1": (40, 80), "manifest": (40, 80)},
                S3_SERVER: {"magic": (20,)},
            }
        big = (500, 2000, 5000)
        return {
            "sim:hdfs": {"v1": big, "manifest": big, "hive": big, "direct": big},
            "sim:abfs": {"v1": (250,), "manifest": big, "hive": big, "direct": big},
            "sim:s3": {"manifest": (500, 2000), "direct": big},
            # the one committer that needs a real S3 API, beside the others on the same server
            S3_SERVER: {"magic": (200, 1000), "direct": (200, 1000), "manifest": (200,)},
        }

    @property
    def plan_models(self) -> list[tuple[str, str, bool]]:
        """(committer, store model, checked?): each is predicted up to the largest size; the
        checked ones are also measured at the check size."""
        if self.quick:
            return [("manifest", "hdfs", True)]
        return [
            ("manifest", "abfs", True),
            ("manifest", "s3", True),  # rename is a copy: the bandwidth term of the model
            ("hive", "abfs", True),
            ("v1", "hdfs", True),
            # a few listings and batched deletes whatever the file count: too small to check
            ("direct", "s3", False),
        ]

    @property
    def plan_check_size(self) -> tuple[int, int, int]:
        return (400, 8, 8) if self.quick else (10_000, 100, 100)

    @property
    def plan_table_sizes(self) -> list[tuple[int, int, int]]:
        if self.quick:
            return [self.plan_check_size]
        return [self.plan_check_size, (100_000, 1_000, 1_000), (1_000_000, 10_000, 1_000)]


# --- stages -------------------------------------------------------------------------------------


def commit_stage(spec: ReportSpec, say: Progress) -> list[dict[str, Any]]:
    rows = []
    with ExitStack() as resources:
        for store, committers in spec.commit_sweep.items():
            url = _store_url(store, resources, say)
            for committer, sizes in committers.items():
                for files in sizes:
                    say(f"commit: {committer} on {store}, {files} files")
                    tasks = max(2, files // 50)
                    report = run_commit_bench(
                        CommitBenchSpec(
                            committers=(committer,),
                            files=files,
                            tasks=tasks,
                            partitions=min(100, tasks),
                            store=url,
                        )
                    )
                    (r,) = report.results
                    rows.append(
                        {
                            "store": store,
                            "committer": committer,
                            "files": files,
                            "tasks": tasks,
                            "job_commit_s": round(r.job_commit_s, 3),
                            "requests": r.requests.get("store_requests", 0),
                        }
                    )
    return rows


def _store_url(store: str, resources: ExitStack, say: Progress) -> str:
    """The benchmark's store argument; the S3 server is started here and stopped with the
    stage."""
    if store != S3_SERVER:
        return store
    say("commit: starting the local S3 server")
    server = resources.enter_context(LocalS3Server())
    resources.enter_context(server.exported())
    return f"s3://{server.create_bucket()}/report"


def plan_stage(spec: ReportSpec, say: Progress) -> dict[str, Any]:
    checks, table = [], []
    for committer, store, checked in spec.plan_models:
        for size in spec.plan_table_sizes:
            files, tasks, partitions = size
            plan = PlanSpec(files, tasks, partitions, store, (committer,))
            say(f"plan: calibrating {committer} on sim:{store} for {files:,} files")
            model = calibrate(plan, committer)
            p = predict(model, plan, files, tasks, partitions)
            table.append({"store": store, **p.to_json()})
            if size != spec.plan_check_size or not checked:
                continue
            say(f"plan: measuring {committer} on sim:{store} at {files:,} files")
            measured = run_commit_bench(
                CommitBenchSpec(
                    committers=(committer,),
                    files=files,
                    tasks=tasks,
                    partitions=partitions,
                    store=f"sim:{store}",
                )
            ).results[0]
            checks.append(
                {
                    "committer": committer,
                    "store": store,
                    "files": files,
                    "predicted_s": round(p.job_commit_s, 3),
                    "measured_s": round(measured.job_commit_s, 3),
                    "error": round(p.job_commit_s / measured.job_commit_s - 1, 3),
                    "predicted_requests": p.job_requests,
                    "measured_requests": measured.requests.get("store_requests", 0),
                }
            )
    return {"checks": checks, "table": table}


def markers_stage(spec: ReportSpec, say: Progress) -> dict[str, Any]:
    say("markers: direct and service")
    size = (8, 200) if spec.quick else (48, 4800)
    return run_markers_bench(MarkersBenchSpec(tasks=size[0], files=size[1]))


def shuffle_stage(spec: ReportSpec, say: Progress) -> dict[str, Any]:
    if spec.quick:
        bench = ShuffleBenchSpec(size=4 << 20, maps=4, reduces=6, engines=("local",))
    else:
        bench = ShuffleBenchSpec(size=256 << 20, maps=50, reduces=100)
    return run_shuffle_bench(bench, progress=lambda m: say(f"shuffle: {m}"))


def write_stage(spec: ReportSpec, say: Progress) -> dict[str, Any]:
    """dataferry beside every installed writer (pyarrow, polars, DuckDB, Delta Lake), and
    beside Dask's and Ray's own Parquet writers on their engines."""
    say("write: the cost of safety")
    if spec.quick:
        bench = WriteBenchSpec(rows=200_000, repeats=3)
    else:
        bench = WriteBenchSpec(repeats=9, dask=True, ray=True)
    return run_write_bench(bench, progress=lambda label, _k, _n: say(f"write: {label}"))


# --- the page -----------------------------------------------------------------------------------


def run_report(spec: ReportSpec, progress: Progress | None = None) -> dict[str, Any]:
    """Run every stage, then write the page, the plots and the JSON."""
    say = progress or (lambda _m: None)
    started = time.perf_counter()
    data: dict[str, Any] = {"machine": machine_info(), "quick": spec.quick}
    data["commit"] = commit_stage(spec, say)
    data["plan"] = plan_stage(spec, say)
    data["markers"] = markers_stage(spec, say)
    data["shuffle"] = shuffle_stage(spec, say)
    data["write"] = write_stage(spec, say)
    data["seconds"] = round(time.perf_counter() - started, 1)
    write_page(spec, data)
    return data


def write_page(spec: ReportSpec, data: dict[str, Any]) -> list[str]:
    """docs/benchmarks.md, its PNGs and report.json, through the store layer."""
    out = os.path.abspath(spec.out)
    parent, name = os.path.dirname(out), os.path.basename(out)
    files = LocalStore(parent)
    scratch = tempfile.mkdtemp(prefix="dataferry-report-")
    try:
        figures = _plots(data, scratch)
        files.delete(name, recursive=True)
        drawn = LocalStore(scratch)
        for fig in figures:
            files.write_bytes(f"{name}/{fig}", drawn.read_bytes(fig))
        files.write_bytes(f"{name}/report.json", json.dumps(data, indent=2).encode())
        files.write_bytes(f"{name}.md", _markdown(name, data).encode())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [f"{name}.md", *(f"{name}/{f}" for f in figures)]


def _footer(data: dict[str, Any]) -> str:
    m = data["machine"]
    return f"{m['cpus']} CPUs, {m['platform']}, Python {m['python']}; `dataferry bench report`; {m['date']}"


def _log_axes(ax: Any) -> None:
    """Log scales labelled with plain numbers (1,000 rather than 10^3) at 1, 2 and 5 times
    each power of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())


def _plots(data: dict[str, Any], directory: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    footer = _footer(data)
    made = []

    def save(fig: Any, name: str) -> None:
        fig.text(0.01, 0.005, footer, fontsize=6, color="grey")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(os.path.join(directory, name), dpi=110)
        plt.close(fig)
        made.append(name)

    # job commit time vs files, one panel per store model
    stores = sorted(
        {r["store"] for r in data["commit"]}, key=lambda s: (not s.startswith("sim:"), s)
    )
    committers = sorted({r["committer"] for r in data["commit"]})
    colour = {c: f"C{i}" for i, c in enumerate(committers)}  # one colour a committer, everywhere
    columns = min(2, len(stores))
    rows = math.ceil(len(stores) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.3 * rows), squeeze=False)
    for ax, store in zip(axes.flat, stores, strict=False):
        for committer in committers:
            pts = sorted(
                (r["files"], r["job_commit_s"])
                for r in data["commit"]
                if r["store"] == store and r["committer"] == committer
            )
            if pts:
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    marker="o",
                    label=committer,
                    color=colour[committer],
                )
        ax.set_title(store)
        ax.set_xlabel("files")
        ax.set_ylabel("job commit s")
        _log_axes(ax)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(stores) :]:
        ax.set_visible(False)
    save(fig, "commit.png")

    # the planner: predicted against measured, and the prediction up to 1M files
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    checks = data["plan"]["checks"]
    labels = [f"{c['committer']}\nsim:{c['store']}" for c in checks]
    xs = range(len(checks))
    a1.bar([x - 0.2 for x in xs], [c["measured_s"] for c in checks], 0.4, label="measured")
    a1.bar([x + 0.2 for x in xs], [c["predicted_s"] for c in checks], 0.4, label="predicted")
    a1.set_xticks(list(xs), labels, fontsize=7)
    a1.set_ylabel("job commit s")
    a1.set_title(f"prediction check at {checks[0]['files']:,} files" if checks else "")
    a1.legend(fontsize=7)
    predicted = dict.fromkeys((r["committer"], r["store"]) for r in data["plan"]["table"])
    for committer, store in predicted:
        series = sorted(
            (r["files"], r["job_commit_s"])
            for r in data["plan"]["table"]
            if r["committer"] == committer and r["store"] == store
        )
        a2.plot(
            [s[0] for s in series],
            [s[1] for s in series],
            marker="o",
            linestyle="--",
            label=f"{committer} sim:{store}",
        )
    _log_axes(a2)
    a2.set_xlabel("files (100 per task)")
    a2.set_ylabel("predicted job commit s")
    a2.grid(alpha=0.3)
    a2.legend(fontsize=7)
    save(fig, "plan.png")

    # markers: requests and write time
    m = data["markers"]["results"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(7, 3.2))
    a1.bar([r["markers"] for r in m], [r["marker_ops"] for r in m], color=["C0", "C1"])
    a1.set_yscale("log")
    a1.set_ylabel("marker store requests")
    a2.bar([r["markers"] for r in m], [r["write_s"] for r in m], color=["C0", "C1"])
    a2.set_ylabel("total write s")
    save(fig, "markers.png")

    # shuffle: time and read sizes per method
    s = data["shuffle"]["results"]
    labels = [f"{r['method']}\n({r['engine']})" for r in s]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    a1.bar(labels, [r["wall_s"] for r in s], color=[f"C{i}" for i in range(len(s))])
    a1.axhline(data["shuffle"]["disk_limit_s"], color="grey", linestyle=":", label="disk limit")
    a1.set_ylabel("wall s")
    a1.legend(fontsize=7)
    a1.tick_params(axis="x", labelsize=7)
    ours = [r for r in s if r["reduce_reads"]]
    a2.bar(
        [f"{r['method']}\n({r['engine']})" for r in ours],
        [r["avg_read_bytes"] / 1024 for r in ours],
        color="C2",
    )
    a2.set_yscale("log")
    a2.set_ylabel("average reduce-side read KiB")
    a2.tick_params(axis="x", labelsize=7)
    save(fig, "shuffle.png")
    return made


def _change(reduction: float | None) -> str:
    if reduction is None:
        return "not measured"
    word = "less" if reduction >= 0 else "more"
    return f"{abs(reduction) * 100:.1f}% {word} with the service"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _markdown(name: str, data: dict[str, Any]) -> str:
    m = data["machine"]
    commit_rows = [
        [r["store"], r["committer"], r["files"], r["tasks"], r["job_commit_s"], r["requests"]]
        for r in data["commit"]
    ]
    checks = data["plan"]["checks"]
    plan_rows = [
        [
            c["committer"],
            f"sim:{c['store']}",
            f"{c['files']:,}",
            c["measured_s"],
            c["predicted_s"],
            f"{c['error'] * 100:+.0f}%",
            c["measured_requests"],
            c["predicted_requests"],
        ]
        for c in checks
    ]
    table_rows = [
        [
            r["committer"],
            f"sim:{r['store']}",
            f"{r['files']:,}",
            f"{r['tasks']:,}",
            f"{r['task_commits_wall_s']:,.1f}",
            f"{r['job_commit_s']:,.1f}",
            f"{r['job_requests']:,}",
            r["bound"],
        ]
        for r in data["plan"]["table"]
    ]
    mk = data["markers"]
    marker_rows = [
        [r["markers"], r["marker_ops"], r["marker_files"], r["marker_s"], r["write_s"]]
        for r in mk["results"]
    ]
    sh = data["shuffle"]
    shuffle_rows = [
        [
            r["engine"],
            r["method"],
            r["wall_s"],
            r["mb_s"],
            r["reduce_reads"] or "-",
            round(r["avg_read_bytes"] / 1024) if r["avg_read_bytes"] else "-",
        ]
        for r in sh["results"]
    ]
    wr = data["write"]
    write_rows = [
        [
            r["writer"],
            r["group"],
            r["wall_s"],
            ", ".join(map(str, r["runs_s"])),
            "-" if r["vs_dataferry"] is None else r["vs_dataferry"],
            f"{r['files']:,}",
            f"{r['bytes'] / 2**20:,.1f}",
        ]
        for r in wr["results"]
    ]
    write_ratio = "not measured" if wr["ratio"] is None else f"**{wr['ratio']}x**"
    write_absent = "".join(
        f"\n- {r['writer']} skipped: {r['reason']}" for r in wr.get("skipped", [])
    ) + "".join(f"\n- {r['writer']} failed: {r['reason']}" for r in wr.get("failed", []))
    worst = max((abs(c["error"]) for c in checks), default=0.0)
    spec = sh["spec"]
    return f"""# Benchmarks

Generated by `dataferry bench report` on {m["date"]} ({m["cpus"]} CPUs, {m["platform"]},
Python {m["python"]}) in {data["seconds"]} s. Nothing on this page is typed by hand: run the
command again to regenerate the page, its plots and `{name}/report.json`.{" (Quick mode: sizes shrunk for a test.)" if data["quick"] else ""}
The `sim:` stores are models of real stores (latency, request ceilings, rename semantics; see
[store-models.md](store-models.md)), run with real sleeps: they compare committers on one
machine, they are not measurements of the real services. `{S3_SERVER}` is a real
S3-protocol server on loopback, where the `magic` committer runs beside the others: its times
are those of moto on this machine, its request counts are what S3 would receive.

## Job commit time against files

![job commit time against files]({name}/commit.png)

{_table(["store", "committer", "files", "tasks", "job commit s", "store requests"], commit_rows)}

## Planning past one machine

`dataferry plan commit` predicts commit time from the store model and each committer's request
counts (fitted on small jobs of the same shape). Checked against measured runs at
{checks[0]["files"] if checks else 0:,} files, the largest error is {worst * 100:.0f}%. The model
is made for stores whose latency dominates the committer's own work; on `sim:hdfs` (1 ms a
request) a parallel committer's CPU time is as large as its waiting and the prediction is
rougher. For the same reason `direct` is predicted but not checked: its job commit is a few
listings and batched deletes whatever the file count, under a second, mostly its own CPU.

![planner]({name}/plan.png)

{_table(["committer", "store", "files", "measured s", "predicted s", "error", "measured requests", "predicted requests"], plan_rows)}

Predicted, 100 files per task (a model, not a measurement):

{_table(["committer", "store", "files", "tasks", "task commits s (8 at once)", "job commit s", "job requests", "job bound by"], table_rows)}

## Write markers

{mk["spec"]["files"]} files from {mk["spec"]["tasks"]} tasks on {mk["spec"]["store"]}, with direct
markers and with the marker service: {mk["marker_ops_ratio"]}x fewer marker requests with the
service, and the total write time {_change(mk["write_time_reduction"])}.

![markers]({name}/markers.png)

{_table(["markers", "marker requests", "marker files", "marker s (all tasks)", "write s"], marker_rows)}

## Shuffle

{spec["size"] >> 20} MiB in {spec["maps"]} maps x {spec["reduces"]} reduces (about
{spec["avg_block_bytes"] // 1024} KiB per block), {spec["workers"]} workers. Disk (sequential
write, fsync) {sh["disk_mb_s"]} MB/s, so {sh["disk_limit_s"]} s to write the data once.
Summary: {", ".join(f"{k} {v}" for k, v in sh["summary"].items())}.

![shuffle]({name}/shuffle.png)

{_table(["engine", "method", "wall s", "MB/s", "reduce reads", "avg read KiB"], shuffle_rows)}

## The cost of safety

`dataferry.write_dataset` (its defaults, and the manifest committer; embedded engine) beside
the writers users pick, each with its own defaults: `pyarrow.dataset.write_dataset` straight
into the destination (no commit protocol at all), polars `write_parquet(partition_by=...)`,
DuckDB `COPY ... PARTITION_BY` and Delta Lake `write_deltalake`, those installed.
{wr["spec"]["rows"]:,} rows of Parquet partitioned by {", ".join(wr["spec"]["partition_by"])},
median of {wr["spec"]["repeats"]} alternating runs, every output read back once. dataferry over
pyarrow: {write_ratio}. Files and bytes differ with each writer's defaults (compression, and
whether the partition columns are also stored in the files).

{_table(["writer", "engine", "median s", "runs s", "x dataferry", "files", "MiB"], write_rows)}
{write_absent}
"""
