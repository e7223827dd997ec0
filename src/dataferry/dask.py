"""Dask integration: committed writes of Dask DataFrames, and the push-based shuffle.

- `to_parquet(df, path, ...)`: `dask.dataframe.to_parquet`'s call, all or nothing. One Dask
  graph (job setup, one write task per partition fused with the partition's computation, job
  commit), so it runs on any Dask scheduler (threads, processes, sync, a distributed Client)
  and is lazy with ``compute=False``.
- `write_dataset(ddf, dest, ...)`: the options of `dataferry.write_dataset`, with the embedded
  engine's driver (commit coordinator, retries, speculation) on a distributed Client;
  partitions are computed on the workers as tasks are launched.
- `shuffle(ddf, on, ...)`: the push-based shuffle on a distributed Client, lazy: a Dask
  DataFrame whose graph runs the shuffle (map tasks, a barrier that finalizes the merge,
  reduce tasks) when computed; `remove_shuffles(client)` removes the files the last
  computations left on the workers.

Dask is an optional dependency: ``pip install 'dataferry[dask]'``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .commit.factory import make_committer
from .dataset.dask_write import (
    FrameSpec,
    PartitionFeed,
    WriteSpec,
    abort_quietly,
    commit_job_task,
    dask_filesystem,
    frame_spec,
    schema_of,
    setup_job_task,
    write_frame,
    write_partition_task,
)
from .dataset.options import (
    WriteOptions,
    build_options,
    mode_of_flags,
    partition_columns,
    resolve_mode,
)
from .dataset.write import (
    WriteResult,
    check_partition_columns,
    open_destination,
    prepare_write,
    write_result,
)
from .engine.attempt import TaskOutput
from .engine.dask import DaskEngine
from .engine.local import EventHook, LocalEngineConfig
from .errors import ConfigError
from .extras import MissingDependency, require
from .store import Store

if TYPE_CHECKING:
    import dask.dataframe as dd
    import pandas as pd
    from dask.delayed import Delayed

# to_parquet's keywords that size and name files (the rest of **kwargs go to the writer)
_SIZE_OPTIONS = (
    "max_rows_per_file",
    "min_rows_per_group",
    "max_rows_per_group",
    "max_open_files",
    "basename_template",
    "target_file_size",
)


def _require(*modules: str) -> None:
    """Import `modules`, or fail naming the extra that installs them."""
    for name in modules:
        require(name, "dataferry.dask")


try:
    from .engine.dask_shuffle import remove_shuffles, shuffle
except ImportError as _missing:  # distributed is not installed
    _shuffle_error = str(_missing)

    def shuffle(ddf: Any, on: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
        """The push-based shuffle; it needs Dask's distributed scheduler."""
        raise MissingDependency("distributed", "dataferry.dask.shuffle", _shuffle_error)

    def remove_shuffles(client: Any = None) -> int:  # type: ignore[misc]
        """Remove the shuffles' files; it needs Dask's distributed scheduler."""
        raise MissingDependency("distributed", "dataferry.dask.remove_shuffles", _shuffle_error)


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
    """Store a Dask DataFrame as Parquet files, all or nothing: `dask.dataframe.to_parquet`
    through a commit protocol.

    The files appear at ``path`` only when the job commits, after every partition is written:
    a write that fails leaves what was there before, and no partial file is ever visible.
    Runs on any Dask scheduler (``"threads"``, ``"processes"``, ``"sync"`` or a distributed
    Client); no Client is needed.

    The graph is a setup task, one write task per partition and a commit task. Each write
    task is fused with the computation of its partition, so the partition is written on the
    worker that computes it, as it is computed: nothing is gathered to the client and no
    copy is kept. It returns a small commit message; the commit task commits the job from
    one message per partition. A task that Dask runs again (``retries=``, or a worker that
    died) writes as a new task attempt, never into an earlier run's, and committed attempts
    whose results Dask did not keep are cleaned up when the job commits.

    Parameters
    ----------
    df
        The Dask DataFrame.
    path
        Destination directory (a path or URL: ``s3://``, ``gs://``, ``abfs://``, ``file://``,
        ``memory://``, ...).
    compression
        Parquet compression: a codec name (``"snappy"``, ``"zstd"``, ``"gzip"``, ...), a
        dict of column name to codec, or None.
    write_index
        True: the index becomes a column (named as the index, or ``__null_dask_index__``
        when unnamed). False: the index is dropped. None (default): written unless it is
        an unnamed integer index, the row numbers Dask's default index holds (as pandas'
        ``to_parquet(index=None)`` and `dataferry.write_dataset` do). Dask's default is
        True, which writes even those row numbers.
    append
        Add the files to the data already at ``path`` (nothing of it is rewritten; unlike
        Dask, the schema is not checked against the existing files).
    overwrite
        Replace the data at ``path``. Unlike Dask, which deletes it before writing, the old
        data is replaced only when the job commits: a failed write leaves it intact, and
        reading ``path`` in the same graph is safe.
    ignore_divisions
        Accepted for Dask's sake; no effect (divisions are not checked on append).
    partition_on
        Columns to partition by, as Hive directories ``col=value/`` (dropped from the files).
    storage_options
        Options of the file system, as fsspec and Dask take them.
    custom_metadata
        Not supported (dataferry's writer does not write key/value footer metadata yet);
        must be None.
    write_metadata_file
        None or False: dataferry writes no ``_metadata`` file (its commit record is
        ``_SUCCESS``). True is refused.
    compute
        True (default): write now and return the result. False: return a
        ``dask.delayed.Delayed`` and touch nothing (not even the job's setup) until it is
        computed; computing it returns the result. Compute it once: a second computation
        would write the same job again. A computation that fails leaves the job's hidden
        directories behind (nothing visible); ``dataferry cleanup PATH`` removes them.
    compute_kwargs
        Options of ``dask.compute`` (``scheduler=``, ``retries=`` on a distributed Client).
    schema
        ``"infer"`` (default: from the frame's ``_meta``; ``object`` columns are sampled
        from the first partitions, as Dask does), None (each partition's own types), a
        ``pyarrow.Schema``, or a dict of column name to pyarrow type for some columns.
    name_function
        Not supported (file names must be unique per task attempt and per rolled file);
        use ``basename_template="data-{i}.parquet"`` instead, where ``{i}`` is unique in
        the job.
    filesystem
        None or ``"fsspec"`` (from ``path``), ``"arrow"`` (pyarrow's file system for
        ``path``), or an fsspec ``AbstractFileSystem`` or ``pyarrow.fs.FileSystem`` object.
    engine
        Dask's Parquet engine name: None, ``"auto"`` or ``"pyarrow"`` (the writer is
        pyarrow's).
    committer
        The commit protocol (``v1``, ``v2``, ``manifest``, ``magic``, ``directory``,
        ``partitioned``, ``hive``, ``direct``), or ``auto`` to choose from the store.
    committer_options
        Options of the committer (see ``dataferry.make_committer``).
    allow_unsafe_rename
        Let a rename-based committer run on a store whose rename is not atomic.
    **kwargs
        Parquet writer options (``pyarrow.parquet.ParquetWriter`` keywords:
        ``compression_level``, ``use_dictionary``, ``write_statistics``,
        ``data_page_size``, ...); ``row_group_size``; and file sizing as in
        `dataferry.write_dataset`: ``max_rows_per_file``, ``min_rows_per_group``,
        ``max_rows_per_group``, ``max_open_files``, ``basename_template``,
        ``target_file_size``.

    Returns
    -------
    WriteResult or dask.delayed.Delayed
        With ``compute=True``, the committed write: destination, committer, job id, rows,
        files, bytes, partitions and the job's run (attempts, timings, statistics). With
        ``compute=False``, a Delayed that computes to it.

    Raises
    ------
    ConfigError
        (a ValueError) For options that are unknown or contradict each other, before
        anything is computed or written.
    DestinationError
        In mode ``error`` (neither ``append`` nor ``overwrite``), when the destination
        already holds data; raised by the setup task, before any partition is written.
    ImportError
        When Dask is not installed (``pip install 'dataferry[dask]'``).

    Notes
    -----
    Mode: ``overwrite`` replaces, ``append`` adds, and neither refuses a destination that
    already holds data (Dask would write into it, mixing two data sets): a safe default.
    With ``compute=True``, a failed computation aborts the job before raising.

    Examples
    --------
    >>> import dataferry.dask
    >>> dataferry.dask.to_parquet(ddf, "s3://bucket/sales", partition_on=["day"])  # doctest: +SKIP
    >>> pending = dataferry.dask.to_parquet(ddf, "out", compute=False)  # doctest: +SKIP
    >>> result = pending.compute(scheduler="threads")  # doctest: +SKIP
    """
    _require("dask.dataframe")
    import dask

    if append and overwrite:
        raise ConfigError("give overwrite=True or append=True, not both")
    if name_function is not None:
        raise ConfigError(
            "name_function is not supported: file names must differ per task attempt and per "
            "rolled file; use basename_template='data-{i}.parquet' ({i} is unique in the job)"
        )
    if custom_metadata:
        raise ConfigError(
            "custom_metadata is not supported: dataferry's Parquet writer does not write "
            "key/value footer metadata"
        )
    if write_metadata_file:
        raise ConfigError(
            "write_metadata_file=True is not supported: dataferry writes no _metadata file "
            "(its commit record is _SUCCESS)"
        )
    if engine not in (None, "auto", "pyarrow"):
        raise ConfigError(f"engine must be 'pyarrow' (or 'auto'), got {engine!r}")
    del ignore_divisions  # nothing to check: no divisions are kept
    parts = partition_columns(partition_on, None, "partition_on")
    sizes = {name: kwargs.pop(name) for name in _SIZE_OPTIONS if name in kwargs}
    options = build_options("parquet", {"compression": compression}, kwargs, **sizes)
    frame = frame_spec(df, write_index, schema)
    check_partition_columns(schema_of(df, frame), parts)
    dest, filesystem = dask_filesystem(path, filesystem)
    # nothing below touches the store: the destination is checked by the setup task
    store = open_destination(dest, filesystem, storage_options)
    output_committer = make_committer(
        committer,
        store,
        mode=mode_of_flags(append, overwrite),
        allow_unsafe_rename=allow_unsafe_rename,
        **dict(committer_options or {}),
    )
    job = output_committer.new_job()
    spec = WriteSpec(parts, options, frame)
    name = f"dataferry-{job.job_uuid[:8]}"
    setup = dask.delayed(functools.partial(setup_job_task, output_committer, job), pure=False)(
        dask_key_name=f"{name}-setup"
    )
    writes = df.map_partitions(
        functools.partial(write_partition_task, spec=spec),
        setup,
        meta=("written", object),
        enforce_metadata=False,
        align_dataframes=False,
        token=f"{name}-write",
    ).to_delayed(optimize_graph=True)
    commit = dask.delayed(functools.partial(commit_job_task, output_committer), pure=False)(
        setup, writes, dask_key_name=f"{name}-commit"
    )
    if not compute:
        return commit
    try:
        (result,) = dask.compute(commit, **dict(compute_kwargs or {}))
    except BaseException:
        abort_quietly(output_committer, job)
        raise
    return result


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
    dest
        A path or URL (``s3://``, ``gs://``, ``abfs://``, ``file://``, ...), a path inside
        ``filesystem``, or an open dataferry Store. The workers must reach it.
    partition_by
        Columns to partition by, as Hive directories ``col=value/`` (``partitioning`` is
        accepted as another name for it).
    format
        ``parquet`` (default), ``csv`` or ``json`` (newline-delimited).
    committer
        The commit protocol, or ``auto`` to choose from the store.
    mode
        ``error`` (default: refuse a non-empty destination), ``append`` or ``overwrite``
        (with ``committer="hive"`` also ``overwrite-table``).
    existing_data_behavior
        pyarrow's name for the mode: ``error``, ``overwrite_or_ignore`` or
        ``delete_matching``.
    filesystem
        An fsspec ``AbstractFileSystem`` or a ``pyarrow.fs.FileSystem`` to write through.
    storage_options
        Options of the file system, as fsspec and Dask take them.
    format_options
        Options of the format's writer (Parquet: pyarrow's ParquetWriter keywords); also
        accepted as keywords (``compression="zstd"``, ``row_group_size=...``).
    max_rows_per_file, min_rows_per_group, max_rows_per_group, max_open_files
        As in ``pyarrow.dataset.write_dataset``, per task.
    basename_template
        File names, with ``{i}`` replaced by a number unique in the job.
    target_file_size
        Bytes after which a file is closed and a new one begun (default 128 MiB).
    write_index
        As in `to_parquet`: True writes the index as a column, False drops it, None writes
        it unless it is an unnamed integer index.
    schema
        As in `to_parquet`: ``"infer"``, None, a ``pyarrow.Schema`` or a dict of types.
    client
        The distributed Client (default: the current one).
    committer_options
        Options of the committer (see ``dataferry.make_committer``).
    allow_unsafe_rename
        Let a rename-based committer run on a store whose rename is not atomic.
    max_attempts
        Attempts per task before the job fails (Spark's ``spark.task.maxFailures``).
    speculation
        Launch duplicates of slow tasks (``spark.speculation``).
    window
        Partitions computed ahead and held at once (default: twice the workers).
    on_event, before_job_commit
        Hooks for progress and tests: ``on_event(event, task, attempt)``, and a call with
        the job just before its commit.
    **writer_options
        The format writer's options as keywords.

    Returns
    -------
    WriteResult
        The destination, the committer, rows, files, bytes, partitions and the job's run.
    """
    _require("dask.dataframe", "distributed")
    parts = partition_columns(partition_by, partitioning, "partition_by or partitioning")
    options = build_options(
        format,
        format_options,
        writer_options,
        max_rows_per_file=max_rows_per_file,
        min_rows_per_group=min_rows_per_group,
        max_rows_per_group=max_rows_per_group,
        max_open_files=max_open_files,
        basename_template=basename_template,
        target_file_size=target_file_size,
    )
    frame = frame_spec(ddf, write_index, schema)
    engine = DaskEngine(
        client, LocalEngineConfig(max_attempts=max_attempts, speculation=speculation)
    )
    store, output_committer = prepare_write(
        dest,
        schema_of(ddf, frame),
        parts,
        options.format,
        committer,
        resolve_mode(mode, existing_data_behavior),
        committer_options,
        allow_unsafe_rename,
        filesystem=filesystem,
        storage_options=storage_options,
    )
    service_url = (committer_options or {}).get("service_url")
    if service_url:  # the workers must reach the marker service
        from .net.addresses import check_reachable, host_of

        hosts = [host_of(w) for w in engine.client.scheduler_info()["workers"]]
        check_reachable(service_url, hosts, "marker service")
    feed = PartitionFeed(
        engine.client, ddf, WriteSpec(parts, options, frame), window or 2 * engine.workers
    )

    def events(event: str, task: int, attempt: int) -> None:
        feed.on_event(event, task, attempt)
        if on_event is not None:
            on_event(event, task, attempt)

    try:
        run = engine.run_job(
            output_committer, feed.start(), on_event=events, before_job_commit=before_job_commit
        )
    finally:
        feed.stop()
    return write_result(store, output_committer, run, feed.stats())


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
    "write_partition",
]
