"""`dataferry bench table`: dataferry's table committers beside the writers of each format.

Write mode (the default): the bench's sales table (`sales_table`), partitioned by day, written
as a Delta table by `deltalake.write_deltalake` and as an Iceberg table by pyiceberg's
`Table.append` (each in this process, the Iceberg table in a SQL catalog on SQLite in a
temporary directory), by Ray's `Dataset.write_iceberg` on local Ray, and by dataferry's table
committers (delta, iceberg, hudi) on each engine: the embedded one (`write_dataset`), a
2-worker Dask LocalCluster (`dataferry.dask`) and local Ray (`dataferry.ray.CommitDatasink`).
Each writer runs once untimed (warm-up), then `repeats` times, the order rotated each round
(`bench write`'s `_measure`); its first write is read back through the format's own reader
(deltalake, pyiceberg, hudi-rs). Reported per writer: the median wall time, the spread, the
ratio to the fastest single-process writer of its format (deltalake, pyiceberg; Hudi has no
Python writer; they run whenever an engine does, `--engines dask,ray` too), and for
dataferry the job commit (the table transaction and marker cleanup) as a share of the write.
A committer not registered in this version, or a writer that fails, is listed with its reason
and left out.

Concurrency mode (`ConcurrencySpec`): `processes` processes (spawned: deltalake panics in a
forked child) each make `commits` small append commits into one Delta table and into one
Iceberg table through dataferry's committers, at once; the tables are then read with
deltalake and pyiceberg: commits landed of those expected, rows found of those expected.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from ..commit.table.registry import format_names, table_format
from ..dataset.synthetic import sales_table
from ..errors import ConfigError
from .machine import machine_info
from .table_peers import (
    PEERS,
    Setting,
    sql_catalog,
)
from .write import Progress, _check_names, _failure, _measure, _Steps
from .writers import (
    DASK_NEEDS,
    FERRY_MODULES,
    RAY_NEEDS,
    Group,
    Writer,
    dask_cluster,
    dask_frame,
    dask_note,
    dataferry_dask_writer,
    dataferry_ray_writer,
    missing,
    ray_dataset,
    ray_session,
)

FORMATS = format_names()  # the table-format registry's rows
ENGINES = ("embedded", "dask", "ray")
# the single-process writers of each format: a dataferry writer is compared with the fastest
SINGLE_PROCESS = {p.writer: p.format for p in PEERS.values() if p.writer}
RAY_PEERS = {p.ray_writer: p.format for p in PEERS.values() if p.ray_writer}
HUDI_OPTIONS = {"table_name": "sales", "record_key": "order_id"}


@dataclass(frozen=True)
class TableBenchSpec:
    rows: int = 3_000_000
    repeats: int = 3
    engines: tuple[str, ...] = ENGINES
    formats: tuple[str, ...] = FORMATS
    blocks: int = 8  # Dask partitions, Ray blocks
    workers: int = 2  # Dask workers, Ray CPUs
    partition_by: tuple[str, ...] = ("day",)

    def __post_init__(self) -> None:
        for name in ("rows", "repeats", "blocks", "workers"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} must be >= 1, got {getattr(self, name)}")
        _check_names(self.engines, ENGINES)
        _check_names(self.formats, FORMATS)


def registered(committer: str) -> str | None:
    """Why dataferry cannot commit `committer` tables here (None: it can)."""
    from ..commit.registry import spec

    row = table_format(committer)
    if row is None or spec(committer) is None:
        return f"committer {committer!r} is not registered in this version"
    if committer not in PEERS:
        return f"the bench has no row for table format {committer!r} (bench/table_peers.py)"
    absent = missing(row.needs)
    return f"{absent} is not installed" if absent else None


# --- the writers -------------------------------------------------------------------------------


def _commit_detail(result: Any) -> dict[str, Any]:
    """What a dataferry run reports: its committer and its job commit's seconds."""
    return {"committer": result.committer, "job_commit_s": result.job_commit_s}


def committer_keywords(fmt: str, catalog: dict[str, str]) -> Callable[[str], dict[str, Any]]:
    """dest -> the committer's keywords for an append to the table at `dest` (made by the job
    when it does not exist)."""
    setting = Setting(catalog, (), HUDI_OPTIONS["record_key"], HUDI_OPTIONS["table_name"])

    def keywords(dest: str) -> dict[str, Any]:
        options = PEERS[fmt].options(dest, setting)
        return {"committer": fmt, "mode": "append", "committer_options": options}

    return keywords


def _per_dest(make: Callable[..., Callable[[Any, str], Any]], keywords, **fixed) -> Callable:
    """A write whose committer keywords depend on its destination (the Iceberg identifier)."""

    def write(data: Any, dest: str) -> Any:
        return make(**fixed, **keywords(dest))(data, dest)

    return write


@dataclass
class _Plan:
    """What one bench run shares: its formats, the Iceberg catalog, and where writers stand."""

    spec: TableBenchSpec
    catalog: dict[str, str]
    formats: list[str]  # dataferry committers that can run
    skipped: list[dict[str, str]]
    notes: list[str]

    @property
    def cols(self) -> list[str]:
        return list(self.spec.partition_by)

    def ferry(self, engine: str, name: str, make: Callable[[str], Callable]) -> list[Writer]:
        """The dataferry writer of each runnable format on `engine`, named `name fmt`;
        `make(fmt)` is its write."""
        return [
            Writer(f"{name} {fmt}", make(fmt), rows=PEERS[fmt].rows, warm=FERRY_MODULES)
            for fmt in self.formats
        ]


def _bound(write: Callable[[pa.Table, str, Setting], None], setting: Setting) -> Callable:
    def bound(data: pa.Table, dest: str) -> None:
        write(data, dest, setting)

    return bound


def _embedded_group(table: pa.Table, plan: _Plan, ferry_too: bool = True) -> Group:
    """The single-process writers of each format, and dataferry's embedded engine's
    (`ferry_too`; without them: the baseline of the engines' rows alone)."""
    cols = plan.cols
    setting = Setting(
        plan.catalog, plan.spec.partition_by, HUDI_OPTIONS["record_key"], HUDI_OPTIONS["table_name"]
    )
    writers: list[Writer] = []
    for fmt in plan.spec.formats:  # the format's own writer, where it has one (PEERS)
        peers = PEERS[fmt]
        if peers.write is None or peers.writer is None:
            continue
        if absent := missing(peers.writer_needs):
            plan.skipped.append({"writer": peers.writer, "reason": f"{absent} is not installed"})
            continue
        write = _bound(peers.write, setting)
        writers.append(Writer(peers.writer, write, rows=PEERS[fmt].rows, warm=peers.writer_needs))

    def ferry(fmt: str) -> Callable:
        keywords = committer_keywords(fmt, plan.catalog)

        def write(data: pa.Table, dest: str) -> Any:
            from ..dataset.write import write_dataset

            return _commit_detail(write_dataset(data, dest, partition_by=cols, **keywords(dest)))

        return write

    if ferry_too:
        writers += plan.ferry("embedded", "dataferry", ferry)
    return Group("embedded", "", writers, data=table)


@contextmanager
def _dask_group(table: pa.Table, plan: _Plan) -> Iterator[Group]:
    if absent := missing(DASK_NEEDS):
        plan.skipped += [
            {"writer": f"dataferry.dask {f}", "reason": f"{absent} is not installed"}
            for f in plan.formats
        ]
        yield Group("dask", "", [])
        return
    with dask_cluster(plan.spec.workers) as client:
        # write_dataset, not to_parquet: to_parquet's graph cannot carry a table committer
        # in this version (it does not pickle)
        name = "dataferry.dask.write_dataset"

        def ferry(fmt: str) -> Callable:
            return _per_dest(
                lambda **kw: dataferry_dask_writer(
                    plan.spec.partition_by, client, _commit_detail, "write_dataset", **kw
                )[0],
                committer_keywords(fmt, plan.catalog),
            )

        group = Group("dask", "", plan.ferry("dask", "dataferry.dask", ferry))
        plan.notes.append(f"{dask_note(plan.spec.workers, plan.spec.blocks)}; through {name}")
        if group.writers:
            group.data = dask_frame(table, plan.spec.blocks)
        yield group


@contextmanager
def _ray_group(table: pa.Table, plan: _Plan) -> Iterator[Group]:
    # Ray's own writers of the formats that have one (PEERS: Ray's write_iceberg)
    peers = [
        PEERS[f]
        for f in plan.spec.formats
        if PEERS[f].ray_write is not None and not missing(PEERS[f].ray_writer_needs)
    ]
    if absent := missing(RAY_NEEDS):
        names = [p.ray_writer for p in peers] + [f"dataferry.ray {f}" for f in plan.formats]
        plan.skipped += [{"writer": n, "reason": f"{absent} is not installed"} for n in names]
        yield Group("ray", "", [])
        return
    setting = Setting(
        plan.catalog, plan.spec.partition_by, HUDI_OPTIONS["record_key"], HUDI_OPTIONS["table_name"]
    )
    writers: list[Writer] = [
        Writer(str(p.ray_writer), _bound(p.ray_write, setting), rows=p.rows)
        for p in peers
        if p.ray_write is not None
    ]

    def ferry(fmt: str) -> Callable:
        return _per_dest(
            lambda **kw: dataferry_ray_writer(plan.spec.partition_by, _commit_detail, **kw),
            committer_keywords(fmt, plan.catalog),
        )

    writers += plan.ferry("ray", "dataferry.ray", ferry)
    group = Group("ray", "", writers)
    if not writers:
        yield group
        return
    with ray_session(plan.spec.workers):
        group.data, note = ray_dataset(table, plan.spec.blocks, plan.spec.workers)
        plan.notes.append(note)
        try:
            yield group
        finally:
            group.data = None


def _format_of(writer: str) -> str:
    if writer in SINGLE_PROCESS:
        return SINGLE_PROCESS[writer]
    return RAY_PEERS.get(writer) or writer.rsplit(" ", 1)[-1]


def _summarize(results: list[dict[str, Any]]) -> None:
    """Per row: its format, ratio to the fastest single-process writer of its format,
    and for dataferry the job commit's share of the write."""
    fastest: dict[str, tuple[float, str]] = {}
    for r in results:
        r["format"] = _format_of(r["writer"])
        if r["writer"] in SINGLE_PROCESS:
            best = fastest.get(r["format"])
            if best is None or r["wall_s"] < best[0]:
                fastest[r["format"]] = (r["wall_s"], r["writer"])
    for r in results:
        runs = r["runs_s"]
        best = fastest.get(r["format"])
        r["baseline"] = best[1] if best else None
        r["vs_fastest"] = round(r["wall_s"] / best[0], 3) if best else None
        commits = [d["job_commit_s"] for d in r.get("run_details", ()) if isinstance(d, dict) and d]
        if commits and len(commits) == len(runs):
            r["job_commit_s"] = round(statistics.median(commits), 4)
            r["job_commit_pct"] = round(
                100 * statistics.median(c / w for c, w in zip(commits, runs, strict=True)), 2
            )
            r["detail"] = f"committer {r['run_details'][0]['committer']}"
        else:
            r["job_commit_s"] = r["job_commit_pct"] = None
        r.pop("run_details", None)


def run_table_bench(spec: TableBenchSpec, progress: Progress | None = None) -> dict[str, Any]:
    table = sales_table(spec.rows)
    base = tempfile.mkdtemp(prefix="dataferry-bench-table-")
    skipped: list[dict[str, str]] = []
    formats = []
    for fmt in spec.formats:
        why = registered(fmt)
        if why:
            skipped += [
                {"writer": f"dataferry {fmt}", "group": e, "reason": why} for e in spec.engines
            ]
        else:
            formats.append(fmt)
    plan = _Plan(spec, sql_catalog(os.path.join(base, "catalog")), formats, [], [])
    # the single-process writers run whenever an engine does: each row's ratio is to them
    engines = spec.engines if "embedded" in spec.engines else ("embedded", *spec.engines)
    ferry_too = "embedded" in spec.engines
    openers: dict[str, Callable[[], AbstractContextManager[Group]]] = {
        "embedded": lambda: nullcontext(_embedded_group(table, plan, ferry_too)),
        "dask": lambda: _dask_group(table, plan),
        "ray": lambda: _ray_group(table, plan),
    }
    per_engine = len(formats) + 2  # at most: the peers, or dataferry's
    steps = _Steps(progress, len(engines) * per_engine * (spec.repeats + 1))
    results: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    try:
        for engine in engines:
            steps(f"{engine}: setting up")
            try:
                with openers[engine]() as group:
                    steps.drop(max(0, per_engine - len(group.writers)) * (spec.repeats + 1))
                    data_dir = os.path.join(base, "data")
                    results += _measure(
                        group, table.num_rows, spec.repeats, data_dir, steps, failed, warmup=True
                    )
            except Exception as e:  # the cluster would not start, or not stop
                failed.append(_failure(f"{engine} (cluster)", engine, e))
            skipped += [{**s, "group": engine} for s in plan.skipped]
            plan.skipped.clear()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    _summarize(results)
    notes = [
        "iceberg: a SQL catalog on SQLite in a temporary directory; pyiceberg and Ray's "
        "write_iceberg create the table (identity-partitioned) in the timed write, as "
        "dataferry's committer does",
        *(f"{f}: {PEERS[f].no_writer}" for f in spec.formats if PEERS[f].writer is None),
        *plan.notes,
    ]
    return {
        "benchmark": "table",
        "mode": "write",
        "spec": {**asdict(spec), "bytes": table.nbytes},
        "machine": machine_info(),
        "results": results,
        "skipped": skipped,
        "failed": failed,
        "notes": notes,
    }
