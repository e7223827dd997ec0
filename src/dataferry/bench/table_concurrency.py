"""`dataferry bench table --concurrency`: `processes` processes (spawned: deltalake panics in a
forked child) each make `commits` small append commits into one Delta table, one Iceberg
table and one Hudi table through dataferry's committers, at once; the tables are then read
with deltalake, pyiceberg and hudi-rs: commits landed of those expected, rows found of those expected. Beside
each, the format's own appends from as many processes (`write_deltalake(mode="append")`,
pyiceberg's `Table.append`), run right after dataferry's on a table of their own: their lost
commits are raised to their callers and counted as errors."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from ..dataset.synthetic import sales_table
from ..errors import ConfigError
from .machine import machine_info
from .table import FORMATS, HUDI_OPTIONS, committer_keywords, registered, sql_catalog
from .table_peers import PEERS, Setting
from .write import Progress, _check_names, _failure, _Steps

# the formats whose commits the bench can count through their own library (PEERS' versions)
COUNTABLE = tuple(f for f in FORMATS if f in PEERS and PEERS[f].versions is not None)
# what each format's appenders add to the bench's committer options: Hudi's appends are
# inserts (each commit's order ids are its own), which commit without the destination's
# claim; its default, an upsert, looks keys up in the table under the claim
# Hudi's inserts go without the claim only into a table without Hudi's metadata table
APPEND_OPTIONS: dict[str, dict[str, Any]] = {
    "hudi": {"operation": "insert", "metadata_table": False}
}


@dataclass(frozen=True)
class ConcurrencySpec:
    processes: int = 10
    commits: int = 20  # append commits per process
    rows: int = 100  # rows per commit
    formats: tuple[str, ...] = COUNTABLE
    timeout_s: float = 1800.0  # for all the processes of one format
    peers: bool = True  # the format's own appends beside dataferry's

    def __post_init__(self) -> None:
        for name in ("processes", "commits", "rows"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} must be >= 1, got {getattr(self, name)}")
        _check_names(self.formats, COUNTABLE)


def commit_rows(k: int, rows: int) -> pa.Table:
    """The `k`th small commit's rows: a sales table whose order ids are `k`'s own."""
    t = sales_table(rows, seed=k)
    ids = pa.array(range(k * rows, (k + 1) * rows), pa.int64())
    return t.set_column(t.schema.get_field_index("order_id"), "order_id", ids)


def _peer_append(fmt: str, dest: str, rows: pa.Table, catalog: dict[str, str]) -> None:
    """One append by the format's own library (its table made by the first, if none)."""
    if fmt == "delta":
        from deltalake import write_deltalake

        write_deltalake(dest, rows, mode="append", partition_by=["day"])
        return
    from .table_peers import create_iceberg_table, downcast_ns, identifier_for, load_catalog

    with downcast_ns():
        cat = load_catalog(catalog)
        if not cat.table_exists(identifier_for(dest)):
            create_iceberg_table(cat, dest, rows.schema, ["day"])
        cat.load_table(identifier_for(dest)).append(rows)


def _appender(
    fmt: str,
    dest: str,
    keywords: dict[str, Any],
    first: int,
    spec: ConcurrencySpec,
    ready,
    go,
    out,
) -> None:
    """One process of the concurrency bench: `spec.commits` append jobs, in a row."""
    report: dict[str, Any] = {"first": first, "ok": 0, "errors": []}
    try:
        try:
            from ..dataset.write import write_dataset

            tables = [commit_rows(first + i, spec.rows) for i in range(spec.commits)]
        finally:
            ready.release()  # imported and its rows made (or failed): `_start_together`
        go.wait(spec.timeout_s)  # every process is ready: they start at once
        report["start"] = time.time()
        commit_s = []
        for t in tables:
            try:
                if "peer" in keywords:
                    began = time.perf_counter()
                    _peer_append(fmt, dest, t, keywords["peer"])
                    commit_s.append(time.perf_counter() - began)
                else:
                    commit_s.append(
                        write_dataset(t, dest, partition_by=["day"], **keywords).job_commit_s
                    )
                report["ok"] += 1
            except Exception as e:
                report["errors"].append(f"{type(e).__name__}: {e}"[:300])
        report["end"] = time.time()
        report["job_commit_s"] = commit_s
    except BaseException as e:
        report["errors"].append(f"{type(e).__name__}: {e}"[:300])
    out.put(json.dumps(report))


def _start_together(ready: Any, go: Any, processes: int, deadline: float) -> bool:
    """Let the appenders go once each of them is ready (its imports done, its rows made), so
    the timed run holds their appends and not the other processes' start-up (a spawned
    process imports dataferry, pyarrow and the format's library: seconds of CPU on a small
    machine). False, and they go all the same, when some were not ready by `deadline`."""
    try:
        for _ in range(processes):
            if not ready.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return False
        return True
    finally:
        go.set()


class _Table:
    """The table of one format in the concurrency bench: its commits and rows as its own
    reader sees them."""

    def __init__(self, fmt: str, dest: str, catalog: dict[str, str], peer: bool) -> None:
        self.fmt, self.dest, self.catalog = fmt, dest, catalog
        if peer:
            self.keywords: dict[str, Any] = {"peer": catalog}
        else:
            self.keywords = committer_keywords(fmt, catalog)(dest)
            options = {**self.keywords["committer_options"], **APPEND_OPTIONS.get(fmt, {})}
            self.keywords["committer_options"] = options
        self.setting = Setting(
            catalog, ("day",), HUDI_OPTIONS["record_key"], HUDI_OPTIONS["table_name"]
        )

    def commits(self) -> int:
        versions = PEERS[self.fmt].versions
        if versions is None:
            raise ConfigError(f"{self.fmt}: the bench cannot count this format's commits")
        return versions(self.dest, self.setting)

    def order_ids(self) -> pa.Array:
        own = PEERS[self.fmt].readers[0]
        return own.read(self.dest, self.setting)["order_id"].combine_chunks()


def _concurrent_run(
    fmt: str, base: str, spec: ConcurrencySpec, peer: bool = False
) -> dict[str, Any]:
    import multiprocessing
    import queue as queues

    import pyarrow.compute as pc

    catalog = sql_catalog(os.path.join(base, "catalog"))
    table = _Table(fmt, os.path.join(base, f"{fmt}-peer" if peer else fmt), catalog, peer)
    PEERS[fmt].setup(table.setting)  # the catalog's namespace made before the processes race
    expected_commits = spec.processes * spec.commits
    # the table is made first (one commit, its rows counted): what races is the appends
    from ..dataset.write import write_dataset

    first = commit_rows(expected_commits, spec.rows)
    if peer:
        _peer_append(fmt, table.dest, first, catalog)
    else:
        write_dataset(first, table.dest, partition_by=["day"], **table.keywords)
    before = table.commits()
    ctx = multiprocessing.get_context("spawn")  # deltalake panics in a forked child
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_appender,
            args=(fmt, table.dest, table.keywords, p * spec.commits, spec, ready, go, out),
            daemon=True,
        )
        for p in range(spec.processes)
    ]
    for p in procs:
        p.start()
    reports, errors = [], []
    deadline = time.monotonic() + spec.timeout_s
    if not _start_together(ready, go, len(procs), deadline):
        errors.append("not every process was ready in time")
    try:
        while len(reports) < len(procs):
            try:
                reports.append(json.loads(out.get(timeout=max(0.1, deadline - time.monotonic()))))
            except queues.Empty:
                errors.append(f"{len(procs) - len(reports)} processes did not report in time")
                break
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.terminate()
                p.join()
    ids = table.order_ids()
    expected_rows = (expected_commits + 1) * spec.rows
    starts = [r["start"] for r in reports if "start" in r]
    ends = [r["end"] for r in reports if "end" in r]
    wall = max(ends) - min(starts) if starts and ends else None
    commit_s = [s for r in reports for s in r.get("job_commit_s", ())]
    errors += [e for r in reports for e in r["errors"]]
    landed = table.commits() - before
    return {
        "format": fmt,
        "writer": PEERS[fmt].writer if peer else "dataferry",
        "processes": spec.processes,
        "commits_per_process": spec.commits,
        "commits_expected": expected_commits,
        "commits_reported": sum(r["ok"] for r in reports),
        "commits_landed": landed,
        "rows_expected": expected_rows,
        "rows_found": len(ids),
        "distinct_ids": len(pc.unique(ids)),
        "wall_s": round(wall, 3) if wall is not None else None,
        "commits_per_s": round(landed / wall, 2) if wall else None,
        "job_commit_median_s": round(statistics.median(commit_s), 4) if commit_s else None,
        "job_commit_max_s": round(max(commit_s), 4) if commit_s else None,
        "errors": errors[:20],
        "error_count": len(errors),
        "ok": landed == expected_commits and len(ids) == expected_rows == len(pc.unique(ids)),
    }


def run_concurrency_bench(
    spec: ConcurrencySpec, progress: Progress | None = None
) -> dict[str, Any]:
    steps = _Steps(progress, len(spec.formats) * (2 if spec.peers else 1))
    results, skipped, failed = [], [], []
    base = tempfile.mkdtemp(prefix="dataferry-bench-concurrency-")
    try:
        for fmt in spec.formats:
            why = registered(fmt)
            if why:
                skipped.append(
                    {"writer": f"dataferry {fmt}", "group": "concurrency", "reason": why}
                )
                steps.drop(2 if spec.peers else 1)
                continue
            own_writer = spec.peers and PEERS[fmt].writer is not None
            if spec.peers and not own_writer:
                skipped.append(
                    {"writer": fmt, "group": "concurrency", "reason": PEERS[fmt].no_writer}
                )
                steps.drop(1)
            for peer in (False, True) if own_writer else (False,):
                who = PEERS[fmt].writer if peer else "dataferry"
                steps(f"{fmt}, {who}: {spec.processes} processes x {spec.commits} appends")
                try:
                    results.append(_concurrent_run(fmt, os.path.join(base, fmt), spec, peer))
                except Exception as e:
                    failed.append(_failure(f"{who} {fmt}", "concurrency", e))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {
        "benchmark": "table",
        "mode": "concurrency",
        "spec": asdict(spec),
        "machine": machine_info(),
        "results": results,
        "skipped": skipped,
        "failed": failed,
        "notes": [
            f"each process: {spec.commits} append jobs of {spec.rows} rows (partitioned by "
            "day) through write_dataset, one after another; the processes (spawned) start "
            "together",
            "the table is made first by one commit of its own, not counted as landed; its "
            "rows are in rows expected",
            "iceberg: a SQL catalog on SQLite shared by the processes",
            "hudi: inserts (operation='insert') into a table without Hudi's metadata table "
            "(metadata_table=False), each job its own instant; commits counted as hudi-rs's "
            "completed instants",
            "the format's own appends (deltalake's write_deltalake, pyiceberg's Table.append) "
            "run right after dataferry's, on a table of their own; a commit they lose is "
            "raised to its caller and counted in errors (dataferry retries and lands it)",
        ],
    }
