"""Dask integration: `dataferry.dask.write_dataset(ddf, dest, ...)` and
`dataferry.dask.shuffle(ddf, on, npartitions=...)`.

Job setup and job commit run on the client; each partition is one task whose attempts run on
the workers, where the partition's data already is.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from .dataset.options import WriteOptions
from .dataset.task import write_rows
from .dataset.write import WriteResult, prepare_write, write_result
from .engine.dask import DaskEngine
from .engine.dask_shuffle import shuffle
from .engine.local import EventHook, LocalEngineConfig


def write_partition(pdf: Any, partition_by: tuple[str, ...], fmt: str, out: Any) -> dict[str, Any]:
    """One Dask partition (a pandas DataFrame) as one task's output."""
    import pyarrow as pa

    table = pa.Table.from_pandas(pdf, preserve_index=False)
    return write_rows(out, table.schema, partition_by, WriteOptions(format=fmt), [table])


def _replicate(client: Any, futures: list[Any]) -> None:
    """Keep each task's input on two workers: a retried attempt after a worker died needs its
    partition, and losing the only copy sends Dask back to recompute it while the attempt's
    result is awaited."""
    if len(client.scheduler_info().get("workers", {})) > 1:
        client.replicate(futures, n=2)


def write_dataset(
    ddf: Any,
    dest: str | os.PathLike[str],
    *,
    partition_by: Sequence[str] = (),
    format: str = "parquet",
    committer: str = "auto",
    mode: str = "error",
    client: Any = None,
    committer_options: dict[str, Any] | None = None,
    max_attempts: int = 4,
    speculation: bool = False,
    on_event: EventHook | None = None,
) -> WriteResult:
    """Write a Dask DataFrame as a committed, partitioned data set (one task per partition)."""
    import pyarrow as pa

    engine = DaskEngine(
        client, LocalEngineConfig(max_attempts=max_attempts, speculation=speculation)
    )
    schema = pa.Schema.from_pandas(ddf._meta, preserve_index=False)
    store, com = prepare_write(
        dest, schema, tuple(partition_by), format, committer, mode, committer_options
    )
    parts = engine.client.compute(ddf.to_delayed())
    # each task's work is built on the worker that holds its partition: no data moves to the client
    works = [
        engine.client.submit(
            functools.partial, write_partition, part, tuple(partition_by), format, pure=False
        )
        for part in parts
    ]
    _replicate(engine.client, works)
    run = engine.run_job(com, works, on_event=on_event)
    return write_result(store, com, run)


__all__ = ["DaskEngine", "shuffle", "write_dataset", "write_partition"]
