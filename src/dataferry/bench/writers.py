"""The writers `dataferry bench write` puts beside dataferry, and what they leave behind.

A writer is a name, the modules it needs, an untimed `prepare` (its own form of the input: a
polars DataFrame, a DuckDB connection with the table registered) and the timed `write`. A writer
whose library is not installed is skipped, and said so. Writers run in groups that share an
input and an engine: `table` (in this process), `dask` (a LocalCluster) and `ray` (a local
`ray.init`); each group has a dataferry writer every other one is compared with.

What a writer wrote is read back once (`inspect_output`): its data files (Parquet files outside
directories starting with `_` or `.`, where commit records and Delta logs live), their sizes,
the partition directories, and the rows, from the Parquet footers with pyarrow, or from Delta's
own reader for a Delta table.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

Write = Callable[[Any, str], Any]

DEFAULT_CODEC = "default"  # each writer's own codec

# what dataferry's write path imports as it goes: imported before any clock starts
FERRY_MODULES = ("dataferry.dataset.write", "pyarrow.dataset", "pyarrow.parquet")
DASK_MODULES = ("dask.dataframe", "dask.dataframe.io.parquet", "pyarrow.dataset")


@dataclass(frozen=True)
class Writer:
    name: str
    write: Write  # (the group's input, destination) -> a detail to show, or None
    prepare: Callable[[Any], Any] | None = None  # its own input from the group's, untimed
    rows: Callable[[str], int] | None = None  # rows read back; None: the Parquet footers
    close: Callable[[Any], None] | None = None  # releases what prepare made
    warm: tuple[str, ...] = ()  # modules imported before the clock starts
    codec: str = DEFAULT_CODEC  # the Parquet codec it writes with (`Codec.label`)

    @property
    def key(self) -> str:
        """The writer's name, and its codec unless it writes its own default: unique in a
        group that runs each writer at several codecs."""
        return self.name if self.codec == DEFAULT_CODEC else f"{self.name} {self.codec}"


@dataclass
class Group:
    """Writers sharing an input and an engine; ratios are to `baseline`."""

    name: str
    baseline: str
    writers: list[Writer]
    data: Any = None  # the shared input (the table, a persisted Dask DataFrame, a Ray Dataset)
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Output:
    files: int
    bytes: int
    sizes: tuple[int, ...]
    partitions: int
    rows: int

    def size_stats(self) -> dict[str, int]:
        if not self.sizes:
            return {"min": 0, "median": 0, "max": 0}
        return {
            "min": min(self.sizes),
            "median": int(statistics.median(self.sizes)),
            "max": max(self.sizes),
        }


def missing(modules: tuple[str, ...]) -> str | None:
    """The first of `modules` that cannot be imported, or None when all can."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


def data_files(dest: str) -> list[tuple[str, int]]:
    """(path, bytes) of every data file under dest, sorted."""
    found = []
    for root, dirs, files in os.walk(dest):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for f in files:
            if f.endswith(".parquet") and not f.startswith(("_", ".")):
                path = os.path.join(root, f)
                found.append((path, os.path.getsize(path)))
    return sorted(found)


def parquet_rows(dest: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(path).num_rows for path, _ in data_files(dest))


def delta_rows(dest: str) -> int:
    """Rows of the Delta table's current version, through deltalake's own reader (the files
    its log lists)."""
    from deltalake import DeltaTable

    table = DeltaTable(dest)
    if hasattr(table, "count"):
        return int(table.count())
    return table.to_pyarrow_dataset().count_rows()


def inspect_output(dest: str, rows: Callable[[str], int] | None = None) -> Output:
    files = data_files(dest)
    return Output(
        files=len(files),
        bytes=sum(size for _, size in files),
        sizes=tuple(size for _, size in files),
        partitions=len({os.path.dirname(path) for path, _ in files}),
        rows=(rows or parquet_rows)(dest),
    )


def dataferry_keywords(**wanted: Any) -> dict[str, Any]:
    """Those of `wanted` (set, not None) that `write_dataset` takes in this version."""
    from ..dataset.write import write_dataset

    params = inspect.signature(write_dataset).parameters
    return {k: v for k, v in wanted.items() if v is not None and k in params}


# --- in this process ---------------------------------------------------------------------------


def _group(
    name: str,
    baseline: str,
    candidates: list[tuple[tuple[str, ...], Writer]],
    only: tuple[str, ...],
    reasons: dict[str, str] | None = None,
) -> Group:
    group = Group(name, baseline, [])
    for modules, writer in candidates:
        if only and writer.name not in only:
            continue
        why = (reasons or {}).get(writer.name)
        absent = missing(modules)
        if absent:
            why = f"{absent} is not installed"
        if why:
            group.skipped.append({"writer": writer.name, "reason": why})
        else:
            group.writers.append(writer)
    return group


def _not_installed(name: str, baseline: str, absent: str, only: tuple[str, ...]) -> Group:
    """The group of an engine that is not installed: its two writers (`name` and `baseline`,
    those of them `only` asks for) skipped, for `absent`."""
    group = Group(name, baseline, [])
    for writer in (name, baseline):
        if not only or writer in only:
            group.skipped.append({"writer": writer, "reason": f"{absent} is not installed"})
    return group


# --- Dask and Ray ------------------------------------------------------------------------------


def dataferry_dask_writer(
    partition_by: tuple[str, ...],
    client: Any = None,
    detail: Callable[[Any], Any] | None = None,
    entry: str = "to_parquet",
    **options: Any,
) -> tuple[Write, str]:
    """`dataferry.dask.to_parquet` when it exists (and `entry` asks for it), else
    `dataferry.dask.write_dataset`; and which one it is. `options` (committer=,
    committer_options=, ...) go to either call; `detail` makes the run's detail from the
    WriteResult (default: the committer's name)."""
    import dataferry.dask as ferry

    cols = list(partition_by)
    shown = detail or _committer_detail
    if entry == "to_parquet" and hasattr(ferry, "to_parquet"):

        def to_parquet(ddf: Any, dest: str) -> Any:
            return shown(ferry.to_parquet(ddf, dest, partition_on=cols, **options))

        return to_parquet, "dataferry.dask.to_parquet"

    def write(ddf: Any, dest: str) -> Any:
        return shown(ferry.write_dataset(ddf, dest, partition_by=cols, client=client, **options))

    return write, "dataferry.dask.write_dataset"


def dataferry_ray_writer(
    partition_by: tuple[str, ...], detail: Callable[[Any], Any] | None = None, **options: Any
) -> Write:
    """`ds.write_datasink(dataferry.ray.CommitDatasink(dest, ...))`; `options` (committer=,
    committer_options=, ...) go to the sink, `detail` as for `dataferry_dask_writer`."""
    cols = list(partition_by)
    shown = detail or _committer_detail

    def write(ds: Any, dest: str) -> Any:
        from ..ray import CommitDatasink

        sink = CommitDatasink(dest, partition_by=cols, **options)
        ds.write_datasink(sink)
        return shown(sink.result)

    return write


def _committer_detail(result: Any) -> str | None:
    name = getattr(result, "committer", None)
    return f"committer {name}" if isinstance(name, str) else None


def dask_to_parquet(partition_by: tuple[str, ...]) -> Write:
    def write(ddf: Any, dest: str) -> None:
        import dask.dataframe as dd

        dd.to_parquet(ddf, dest, partition_on=list(partition_by), write_index=False)

    return write


@contextmanager
def dask_group(
    table: pa.Table,
    partition_by: tuple[str, ...],
    partitions: int,
    workers: int,
    only: tuple[str, ...] = (),
) -> Iterator[Group]:
    """`dask.dataframe.to_parquet` against dataferry's Dask writer, on a LocalCluster of
    `workers` single-threaded workers in this process (processes=False: the data and both
    writers share the process, as in the table group, and no writer pays for pickling the
    partitions to worker processes). The table is split in `partitions` and persisted first."""
    absent = missing(DASK_NEEDS)
    if absent:
        yield _not_installed("dask", "dataferry.dask", absent, only)
        return
    with dask_cluster(workers) as client:
        ferry_write, ferry_name = dataferry_dask_writer(partition_by, client)
        group = _group(
            "dask",
            "dataferry.dask",
            [
                ((), Writer("dask", dask_to_parquet(partition_by), warm=DASK_MODULES)),
                ((), Writer("dataferry.dask", ferry_write, warm=FERRY_MODULES)),
            ],
            only,
        )
        group.notes.append(f"{dask_note(workers, partitions)}; dataferry.dask is {ferry_name}")
        if group.writers:
            group.data = dask_frame(table, partitions)
        yield group


DASK_NEEDS = ("dask.dataframe", "distributed")
RAY_NEEDS = ("ray", "ray.data")


@contextmanager
def dask_cluster(workers: int) -> Iterator[Any]:
    """A LocalCluster of `workers` single-threaded workers in this process (processes=False:
    the data and the writers share the process, and no writer pays for pickling the
    partitions to worker processes), and its Client."""
    import dask
    import distributed

    with (
        dask.config.set({"distributed.worker.memory.target": False}),
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=False,
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def dask_frame(table: pa.Table, partitions: int) -> Any:
    """The table as a Dask DataFrame of `partitions` partitions, persisted on the cluster."""
    import dask.dataframe as dd
    import distributed

    ddf = dd.from_pandas(table.to_pandas(), npartitions=partitions).persist()
    distributed.wait(ddf)
    return ddf


def dask_note(workers: int, partitions: int) -> str:
    return (
        f"dask: LocalCluster, {workers} workers x 1 thread, processes=False; the table in "
        f"{partitions} partitions, persisted"
    )


@contextmanager
def ray_group(
    table: pa.Table,
    partition_by: tuple[str, ...],
    blocks: int,
    cpus: int,
    only: tuple[str, ...] = (),
) -> Iterator[Group]:
    """Ray Data's `write_parquet(partition_cols=...)` against
    `write_datasink(dataferry.ray.CommitDatasink(...))` on a local `ray.init(num_cpus=cpus)`,
    the table in `blocks` blocks, materialized first."""
    absent = missing(RAY_NEEDS)
    if absent:
        yield _not_installed("ray", "dataferry.ray", absent, only)
        return
    cols = list(partition_by)

    def ray_write(ds: Any, dest: str) -> None:
        ds.write_parquet(dest, partition_cols=cols)

    group = _group(
        "ray",
        "dataferry.ray",
        [
            ((), Writer("ray", ray_write)),
            ((), Writer("dataferry.ray", dataferry_ray_writer(partition_by))),
        ],
        only,
    )
    if not group.writers:
        yield group
        return
    with ray_session(cpus):
        group.data, note = ray_dataset(table, blocks, cpus)
        group.notes.append(note)
        try:
            yield group
        finally:
            group.data = None


@contextmanager
def ray_session(cpus: int) -> Iterator[None]:
    """A local `ray.init(num_cpus=cpus)` (unless Ray is running already), quiet: Ray Data's
    INFO log and progress bars off for its length; shut down after if it was started here."""
    import ray

    started = False
    if not ray.is_initialized():
        ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
        started = True
    quiet = [logging.getLogger(name) for name in ("ray", "ray.data")]
    levels = [q.level for q in quiet]
    try:
        import ray.data

        for q in quiet:  # Ray Data logs every execution at INFO
            q.setLevel(logging.WARNING)
        ray.data.DataContext.get_current().enable_progress_bars = False
        yield
    finally:
        for q, level in zip(quiet, levels, strict=True):
            q.setLevel(level)
        if started:
            ray.shutdown()


def ray_dataset(table: pa.Table, blocks: int, cpus: int) -> tuple[Any, str]:
    """The table as a materialized Ray Dataset of `blocks` blocks, and a note saying so."""
    import ray.data

    size = max(1, -(-table.num_rows // blocks))
    parts = [table.slice(i * size, size) for i in range(blocks) if i * size < len(table)]
    ds = ray.data.from_arrow(parts).materialize()
    return (
        ds,
        f"ray: local ray.init(num_cpus={cpus}); the table in {len(parts)} blocks, materialized",
    )
