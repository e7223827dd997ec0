"""`write_dataset`: the one call most users need.

It splits the data into tasks; each task writes Hive-partitioned files
(`col=value/part-<task>-<jobuuid>.c000.<ext>`) through its task attempt; the engine retries,
speculates and commits through the chosen committer. The result is readable by
`pyarrow.dataset.dataset(dest, partitioning="hive")` once the job has committed.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..commit.destination import prepare_destination
from ..commit.factory import make_committer
from ..engine.attempt import TaskOutput
from ..engine.local import EventHook, JobRun, LocalEngine, LocalEngineConfig
from ..errors import ConfigError
from ..store import Store, open_store, paths
from .formats import writer_for
from .partition import split_by_partition

DEFAULT_ROWS_PER_TASK = 2_000_000


@dataclass
class WriteResult:
    """What a committed write produced."""

    dest: str
    committer: str
    job_id: str
    rows: int
    files: int
    bytes: int
    partitions: int
    run: JobRun

    @property
    def job_commit_s(self) -> float:
        return self.run.job_commit_s


def write_dataset(
    data: pa.Table | pa.RecordBatch | Iterable[pa.Table | pa.RecordBatch],
    dest: str | os.PathLike[str] | Store,
    *,
    partition_by: Sequence[str] = (),
    format: str = "parquet",
    committer: str = "auto",
    engine: LocalEngine | LocalEngineConfig | None = None,
    mode: str = "error",
    tasks: int | None = None,
    committer_options: dict[str, Any] | None = None,
    allow_unsafe_rename: bool = False,
    on_event: EventHook | None = None,
    before_job_commit: Callable[[Any], None] | None = None,
) -> WriteResult:
    """Write `data` to `dest` as a partitioned data set and commit it.

    data: a pyarrow Table or RecordBatch (split into `tasks` tasks), or an iterable of tables
        or batches (one task each).
    mode: `error` (refuse a non-empty destination), `append` or `overwrite`; with
        committer="hive": `append`, `overwrite` (the partitions written are replaced) or
        `overwrite-table`.
    committer: a committer name (`auto` chooses from the store's capabilities).
    engine: None for the embedded local engine on threads (the data is in this process).
    allow_unsafe_rename: let a rename-based committer run on a store whose rename is a copy.
    """
    partition_by = tuple(partition_by)
    chunks = _split(data, tasks)
    store, com = prepare_write(
        dest,
        chunks[0].schema,
        partition_by,
        format,
        committer,
        mode,
        committer_options,
        allow_unsafe_rename,
    )
    if engine is None:
        # the data is already in this process: threads copy nothing, and pyarrow releases the
        # GIL while it encodes and writes (a process pool would first pickle every chunk)
        engine = LocalEngine(executor="threads")
    elif isinstance(engine, LocalEngineConfig):
        engine = LocalEngine(engine)
    works = [functools.partial(write_task, chunk, partition_by, format) for chunk in chunks]
    run = engine.run_job(com, works, on_event=on_event, before_job_commit=before_job_commit)
    return write_result(store, com, run)


def prepare_write(
    dest: str | os.PathLike[str] | Store,
    schema: pa.Schema,
    partition_by: tuple[str, ...],
    fmt: str,
    committer: str,
    mode: str,
    committer_options: dict[str, Any] | None = None,
    allow_unsafe_rename: bool = False,
) -> tuple[Store, Any]:
    """Everything a write does on the driver before any task runs: check the format and the
    partition columns, build the committer for the write mode, and check the destination early
    (the mode itself is decided when the job commits, holding the destination's claim)."""
    writer_for(fmt)  # fail early on an unknown format
    _check_partition_columns(schema, partition_by)
    store = dest if isinstance(dest, Store) else open_store(dest)
    com = make_committer(
        committer,
        store,
        mode=mode,
        allow_unsafe_rename=allow_unsafe_rename,
        **dict(committer_options or {}),
    )
    prepare_destination(store, com.write_mode)
    return store, com


def write_result(store: Store, com: Any, run: JobRun) -> WriteResult:
    task_results = [r for r in run.results.values() if r is not None]
    return WriteResult(
        dest=store.full_url(),
        committer=com.name,
        job_id=str(run.job.job_id),
        rows=sum(r["rows"] for r in task_results),
        files=run.commit.files,
        bytes=run.commit.bytes,
        partitions=len({p for r in task_results for p in r["partitions"]}),
        run=run,
    )


def write_task(
    chunk: pa.Table, partition_by: tuple[str, ...], fmt: str, out: TaskOutput
) -> dict[str, Any]:
    """One task's work: one file per partition of its rows."""
    ext, encode = writer_for(fmt)
    name = f"part-{out.task_index:05d}-{out.job_uuid}.c000.{ext}"
    split = list(split_by_partition(chunk, partition_by))
    out.announce([paths.join(directory, name) for directory, _ in split])
    parts = []
    for directory, rows in split:
        with out.open(paths.join(directory, name)) as sink:
            encode(rows, sink)
        parts.append(directory)
    return {"rows": chunk.num_rows, "partitions": parts}


def _check_partition_columns(schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
    """Fail on the driver, before any task runs, for columns the data does not have."""
    for col in partition_by:
        if col not in schema.names:
            raise ConfigError(
                f"partition column {col!r} is not in the data; columns: {', '.join(schema.names)}"
            )
    if partition_by and len(set(partition_by)) == len(schema.names):
        raise ConfigError("every column is a partition column: no data would be left to write")


def _default_tasks(rows: int) -> int:
    """About two million rows a task (fewer, larger files: cheaper to write and to read), and a multiple of the cores so none idles at the end."""
    cores = os.cpu_count() or 1
    n = max(cores, math.ceil(rows / DEFAULT_ROWS_PER_TASK))
    return min(4 * cores, math.ceil(n / cores) * cores)


def _split(data: Any, tasks: int | None) -> list[pa.Table]:
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        n = tasks or _default_tasks(data.num_rows)
        if n < 1:
            raise ConfigError(f"tasks must be >= 1, got {n}")
        size = max(1, math.ceil(data.num_rows / n)) if data.num_rows else 1
        return [data.slice(i * size, size) for i in range(n)] if data.num_rows else [data]
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise ConfigError(
            f"data must be a pyarrow Table, RecordBatch or an iterable of them, got {type(data).__name__}"
        )
    chunks = []
    for i, item in enumerate(data):
        if isinstance(item, pa.RecordBatch):
            item = pa.Table.from_batches([item])
        if not isinstance(item, pa.Table):
            raise ConfigError(f"data item {i} is a {type(item).__name__}, not a pyarrow Table")
        chunks.append(item)
    if not chunks:
        raise ConfigError("data is empty: no tables or batches to write")
    return chunks
