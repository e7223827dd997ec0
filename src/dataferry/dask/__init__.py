"""Dask integration: committed writes of Dask DataFrames, and the push-based shuffle.

- `to_parquet(df, path, ...)`: `dask.dataframe.to_parquet`'s call, all or nothing. One Dask
  graph (job setup, one write task per partition fused with the partition's computation, job
  commit), so it runs on any Dask scheduler (threads, processes, sync, a distributed Client)
  and is lazy with ``compute=False``.
- `write_dataset(ddf, dest, ...)`: the options of `dataferry.write_dataset`, with the embedded
  engine's driver (commit coordinator, retries, speculation) on a distributed Client;
  partitions are computed on the workers as tasks are launched.
- `write_deltalake(ddf, table_or_uri, ...)`: a Delta table written with deltalake's
  arguments (mode, partition_by, storage_options, ...), as `to_parquet`'s one graph.
- `shuffle(ddf, on, ...)`: the push-based shuffle on a distributed Client, lazy: a Dask
  DataFrame whose graph runs the shuffle (map tasks, a barrier that finalizes the merge,
  reduce tasks) when computed; `remove_shuffles(client)` removes the files the last
  computations left on the workers.

Dask is an optional dependency: ``pip install 'dataferry[dask]'``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..dataset.options import WriteOptions, translate
from ..dataset.params import write_params
from ..dataset.tables import write_deltalake_frame
from ..dataset.write import WriteResult
from ..engine.attempt import TaskOutput
from ..engine.local import EventHook, LocalEngineConfig
from ..extras import MissingDependency, require
from ..store import Store
from .driver import DaskEngine
from .write import FrameSpec, write_frame, write_graph, write_with_driver

if TYPE_CHECKING:
    import dask.dataframe as dd
    import pandas as pd
    from dask.delayed import Delayed


def _require(*modules: str) -> None:
    """Import `modules`, or fail naming the extra that installs them."""
    for name in modules:
        require(name, "dataferry.dask")


try:
    from .push_shuffle import remove_shuffles, shuffle
except ImportError as _missing:  # distributed is not installed
    _shuffle_error = str(_missing)

    def shuffle(ddf: Any, on: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
        """The push-based shuffle; it needs Dask's distributed scheduler."""
        raise MissingDependency("distributed", "dataferry.dask.shuffle", _shuffle_error)

    def remove_shuffles(client: Any = None) -> int:  # type: ignore[misc]
        """Remove the shuffles' files; it needs Dask's distributed scheduler."""
        raise MissingDependency("distributed", "dataferry.dask.remove_shuffles", _shuffle_error)


@write_params("dask.to_parquet")
def to_parquet(
    df: dd.DataFrame,
    path: str | os.PathLike[str],
    *,
    compression: str | dict[str, str] | None = "snappy",
    write_index: bool | None = None,
    append: bool = False,
    overwrite: bool = False,
    ignore_divisions: bool = False,
    partition_on: str | Sequence[str] | None = None,
    storage_options: dict[str, Any] | None = None,
    custom_metadata: dict[str, Any] | None = None,
    write_metadata_file: bool | None = None,
    compute: bool = True,
    compute_kwargs: dict[str, Any] | None = None,
    schema: Any = "infer",
    name_function: Callable[[int], str] | None = None,
    filesystem: Any = None,
    engine: str | None = None,
    committer: str = "auto",
    committer_options: dict[str, Any] | None = None,
    allow_unsafe_rename: bool = False,
    **kwargs: Any,
) -> WriteResult | Delayed:
    """`dask.dataframe.to_parquet` through a commit protocol, all or nothing: the files
    appear at ``path`` when the job commits, after every partition is written; a failed write
    leaves what was there before. One graph (setup, a write task fused with each partition's
    computation, commit) on any Dask scheduler; ``compute=False`` returns a Delayed that
    touches nothing, not even the job's setup, until it is computed (once).

    Dask's arguments (``df``, ``path``, ``compression``, ``partition_on``, ``compute``,
    ``compute_kwargs``, ...) keep Dask's meaning (each is translated onto dataferry's write
    options by its row in `dataferry.dataset.options.ENTRY_POINTS`), except:

    - without ``overwrite`` or ``append``, a destination that holds data is refused
      (DestinationError); ``overwrite=True`` replaces the old data only at the job's commit.
    - ``write_index=None`` (default) leaves out an unnamed integer index (Dask's row numbers).
    - ``schema="infer"`` samples ``object`` columns from the first partitions, as Dask does.
    - ``name_function``, ``custom_metadata`` and ``write_metadata_file=True`` are refused
      (use ``basename_template="data-{i}.parquet"``); ``ignore_divisions`` has no effect;
      ``engine`` must be pyarrow's; ``filesystem`` also takes Dask's "fsspec" and "arrow".
    - ``**kwargs``: pyarrow ParquetWriter options, ``row_group_size``, and the file sizes of
      `dataferry.write_dataset` (``max_rows_per_file``, ``target_file_size``, ...).

    Returns the WriteResult (``compute=False``: a Delayed computing to it). Options unknown or
    at odds raise ConfigError before anything runs; a failed computation aborts the job.
    """
    arguments = dict(locals())  # the call, as given: translated in one place
    _require("dask.dataframe")
    request = translate("dask.to_parquet", arguments)
    return write_graph(
        df,
        request,
        write_index=write_index,
        schema=schema,
        compute=compute,
        compute_kwargs=compute_kwargs,
    )


@write_params("dask.write_dataset")
def write_dataset(
    ddf: dd.DataFrame,
    dest: str | os.PathLike[str] | Store,
    *,
    partition_by: Sequence[str] | None = None,
    format: str = "parquet",
    committer: str = "auto",
    mode: str | None = None,
    existing_data_behavior: str | None = None,
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
    format_options: dict[str, Any] | None = None,
    max_rows_per_file: int | None = None,
    min_rows_per_group: int | None = None,
    max_rows_per_group: int | None = None,
    max_open_files: int | None = None,
    basename_template: str | None = None,
    target_file_size: int | None = None,
    write_index: bool | None = None,
    schema: Any = "infer",
    client: Any = None,
    committer_options: dict[str, Any] | None = None,
    allow_unsafe_rename: bool = False,
    max_attempts: int = 4,
    speculation: bool = False,
    window: int | None = None,
    partitioning: Sequence[str] | None = None,
    on_event: EventHook | None = None,
    before_job_commit: Callable[[Any], None] | None = None,
    **writer_options: Any,
) -> WriteResult:
    """Write a Dask DataFrame as a committed, partitioned data set, with dataferry's driver
    (commit coordinator, retries, speculation) on a distributed Client.

    One task per partition. The job is set up and committed on the client; each attempt runs
    on a worker. Partitions are computed on the workers as their tasks are launched, at most
    ``window`` at a time: each is computed once, on a worker, and let go once its task
    commits (a retry after its worker died recomputes it from the graph). For a frame whose
    partitions share expensive work (a shuffle, a groupby), ``persist()`` it first, or use
    `to_parquet`, which computes the whole graph once.

    Parameters
    ----------
    ddf
        The Dask DataFrame.
    write_index
        As in `to_parquet`: True writes the index as a column, False drops it, None writes
        it unless it is an unnamed integer index.
    schema
        As in `to_parquet`: ``"infer"``, None, a ``pyarrow.Schema`` or a dict of types.
    client
        The distributed Client (default: the current one).
    window
        Partitions computed ahead and held at once (default: twice the workers' threads).

    Returns
    -------
    WriteResult
        The destination, the committer, rows, files, bytes, partitions and the job's run.
    """
    arguments = dict(locals())  # the call, as given: translated in one place
    _require("dask.dataframe", "distributed")
    return write_with_driver(
        ddf,
        translate("dask.write_dataset", arguments),
        write_index=write_index,
        schema=schema,
        client=client,
        config=LocalEngineConfig(max_attempts=max_attempts, speculation=speculation),
        window=window,
        on_event=on_event,
        before_job_commit=before_job_commit,
    )


@write_params("dask.write_deltalake")
def write_deltalake(
    ddf: dd.DataFrame,
    table_or_uri: Any,
    *,
    partition_by: str | Sequence[str] | None = None,
    mode: str = "error",
    storage_options: dict[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
    configuration: dict[str, str | None] | None = None,
    schema_mode: str | None = None,
    write_index: bool | None = None,
    schema: Any = "infer",
    compute_kwargs: dict[str, Any] | None = None,
    committer_options: dict[str, Any] | None = None,
    **options: Any,
) -> WriteResult | None:
    """Write a Dask DataFrame ``ddf`` into a Delta table with `deltalake.write_deltalake`'s
    arguments (see `dataferry.write_deltalake`), as one Dask graph on any scheduler (that
    of `to_parquet`): each partition's files written where it is computed, one Delta
    transaction when the last is written. ``write_index``, ``schema`` and
    ``compute_kwargs`` as in `to_parquet`; ``**options``: the write's sizes and writer
    options, and deltalake's ``predicate``, ``writer_properties``, ``commit_properties`` and
    ``post_commithook_properties``. Returns the WriteResult, or None when ``mode="ignore"``
    found the table."""
    _require("dask.dataframe")
    return write_deltalake_frame(
        ddf,
        table_or_uri,
        partition_by=partition_by,
        mode=mode,
        storage_options=storage_options,
        name=name,
        description=description,
        configuration=configuration,
        schema_mode=schema_mode,
        write_index=write_index,
        schema=schema,
        compute_kwargs=compute_kwargs,
        committer_options=committer_options,
        **options,
    )


def write_partition(
    pdf: pd.DataFrame,
    partition_by: Sequence[str],
    options: WriteOptions | str,
    out: TaskOutput,
    *,
    write_index: bool = False,
) -> dict[str, Any]:
    """Write one pandas DataFrame (a Dask partition) as one task attempt's output.

    Parameters
    ----------
    pdf
        The partition.
    partition_by
        Columns to partition by (Hive directories).
    options
        The write's options, or just a format name (``"parquet"``, ``"csv"``, ``"json"``).
    out
        The task attempt's output handle.
    write_index
        Write the index as a column.

    Returns
    -------
    dict
        The task's result: ``rows``, ``files``, ``bytes``, ``partitions``.
    """
    if isinstance(options, str):
        options = WriteOptions(format=options)
    return write_frame(pdf, tuple(partition_by), options, FrameSpec(None, write_index), out)


__all__ = [
    "DaskEngine",
    "remove_shuffles",
    "shuffle",
    "to_parquet",
    "write_dataset",
    "write_deltalake",
    "write_partition",
]
