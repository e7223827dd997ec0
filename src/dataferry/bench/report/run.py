"""Running the report: one stage per section of the page, each returning its results.

Sections: `commit` (job commit time against files, per committer and store model), `plan` (the
planner's prediction against measured runs, and its table up to 1M files), `markers`,
`shuffle`, `write` (the cost of safety).
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

from ...errors import ConfigError, NotFound
from ...store import LocalStore
from ...testing import LocalS3Server
from ..commit import CommitBenchSpec, run_commit_bench
from ..machine import machine_info
from ..markers import MarkersBenchSpec, run_markers_bench
from ..plan import PlanSpec, calibrate, predict
from ..shuffle import METHODS, ShuffleBenchSpec, run_shuffle_bench, run_shuffle_scale
from ..write import WriteBenchSpec, run_write_bench
from ..write_profile import ProfileSpec, run_write_profile
from .page import write_page
from .spec import S3_SERVER, SECTIONS, Progress, ReportSpec


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
    """The side-by-side run at 1 GiB (held, as users who persist their result), with push
    before its pusher ran in the background (push-sync) beside it; then the scale curve at
    1, 4 and 8 GiB, not held, so memory is the shuffle's own."""
    if spec.quick:
        bench = ShuffleBenchSpec(
            size=4 << 20, maps=4, reduces=6, engines=("local",), methods=("pull", "push")
        )
        scale, sizes = replace(bench, methods=("push",)), [2 << 20, 4 << 20]
    else:
        bench = ShuffleBenchSpec(size=1 << 30, repeats=3, methods=METHODS)
        scale = replace(bench, repeats=1, hold=False, methods=("push", "dask-p2p", "dask-tasks"))
        sizes = [1 << 30, 4 << 30, 8 << 30]
    data = run_shuffle_bench(bench, progress=lambda m: say(f"shuffle: {m}"))
    data["scale"] = run_shuffle_scale(scale, sizes, progress=lambda m: say(f"shuffle scale: {m}"))
    return data


def write_stage(spec: ReportSpec, say: Progress) -> dict[str, Any]:
    """dataferry beside every installed writer (pyarrow, polars, DuckDB, Delta Lake), and
    beside Dask's and Ray's own Parquet writers on their engines."""
    say("write: the cost of safety")
    if spec.quick:
        bench = WriteBenchSpec(rows=200_000, repeats=3)
        profile = ProfileSpec(rows=50_000, repeats=1)
    else:
        bench = WriteBenchSpec(repeats=9, dask=True, ray=True)
        profile = ProfileSpec(repeats=5)
    data = run_write_bench(bench, progress=lambda label, _k, _n: say(f"write: {label}"))
    data["profile"] = run_write_profile(
        profile, progress=lambda label, _k, _n: say(f"write profile: {label}")
    )
    return data


def run_report(spec: ReportSpec, progress: Progress | None = None) -> dict[str, Any]:
    """Run every stage, then write the page, the plots and the JSON."""
    say = progress or (lambda _m: None)
    started = time.perf_counter()
    data: dict[str, Any] = {"machine": machine_info(), "quick": spec.quick}
    stages = {
        "commit": commit_stage,
        "plan": plan_stage,
        "markers": markers_stage,
        "shuffle": shuffle_stage,
        "write": write_stage,
    }
    bad = set(spec.only) - set(SECTIONS)
    if bad:
        raise ConfigError(f"unknown report sections {sorted(bad)}; choose from {SECTIONS}")
    if spec.only:
        data = {**earlier_report(spec), **data}
    for section in SECTIONS:
        if not spec.only or section in spec.only:
            data[section] = stages[section](spec, say)
    data["seconds"] = round(time.perf_counter() - started, 1)
    write_page(spec, data)
    return data


def earlier_report(spec: ReportSpec) -> dict[str, Any]:
    """The report.json a full run left in `spec.out`: the sections not run again come from it."""
    out = os.path.abspath(spec.out)
    store = LocalStore(os.path.dirname(out))
    name = f"{os.path.basename(out)}/report.json"
    try:
        return json.loads(store.read_bytes(name))
    except NotFound:
        raise ConfigError(
            f"{out}/report.json: no earlier report to take the other sections from; "
            "run the whole report first (without --only)"
        ) from None
