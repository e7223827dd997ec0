"""`write_dataset`: the one call most users need.

The data (a table, a data frame, a stream: see `inputs.py`) is cut into tasks; each task writes
Hive-partitioned files (`col=value/part-<task>-<jobuuid>.c<NNN>.<ext>`) through its task
attempt; the engine retries, speculates and commits through the chosen committer. Data in
memory is planned by size (`sizing.py`); a stream is written as it arrives, in bounded memory
(`stream.py`). The result is readable by `pyarrow.dataset.dataset(dest, partitioning="hive")`
once the job has committed, and not a file of it before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pyarrow as pa

from ..commit.base import Committer
from ..commit.destination import prepare_destination
from ..commit.factory import choose_committer, config_type, make_committer
from ..commit.registry import spec
from ..engine.local import EventHook, JobRun, LocalEngine, LocalEngineConfig
from ..errors import ConfigError, DestinationError
from ..net.addresses import check_reachable
from ..progress import check_progress, shorten, task_progress
from ..store import Store, open_store
from .existing import check_existing, writes_schema_file
from .formats import check_writer
from .inputs import Source, as_source, input_options
from .options import WriteOptions, WriteRequest, in_callers_words, translate
from .params import write_params
from .partition import name_limits
from .rows import gather_pieces
from .sizing import plan_tasks
from .stream import StreamFeeder
from .task import write_pieces, write_schema_file


@dataclass
class WriteResult:
    """What a committed write produced.

    stats: how the write was cut (tasks, partitions, sizes, a stream's windows and memory).
    """

    dest: str
    committer: str
    job_id: str
    rows: int
    files: int
    bytes: int
    partitions: int
    run: JobRun
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def job_commit_s(self) -> float:
        return self.run.job_commit_s


@write_params("write_dataset")
def write_dataset(
    data: Any,
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
    max_memory: int | None = None,
    tasks: int | None = None,
    engine: LocalEngine | LocalEngineConfig | None = None,
    committer_options: dict[str, Any] | None = None,
    allow_unsafe_rename: bool = False,
    partitioning: Sequence[str] | None = None,
    schema: pa.Schema | None = None,
    index: bool | None = None,
    preserve_index: bool | None = None,
    schema_mode: str | None = None,
    on_event: EventHook | None = None,
    before_job_commit: Callable[[Any], None] | None = None,
    progress: bool | Any = True,
    **writer_options: Any,
) -> WriteResult:
    """Write data to a destination as a partitioned data set, all or nothing.

    Parameters
    ----------
    data
        A pyarrow Table, RecordBatch, RecordBatchReader or ``pyarrow.dataset.Dataset``; a
        pandas or polars DataFrame or Series (a one-column frame); a polars LazyFrame; a
        dict of columns (as ``pyarrow.table`` takes it); any object with
        ``__arrow_c_stream__``; or a list or iterator of these. Data in memory is planned
        into files by size; readers, datasets, lazy frames and iterators are streamed: read
        once, written as they arrive, in at most ``max_memory`` bytes. Data without rows
        writes one file holding its schema (as ``pandas.DataFrame.to_parquet`` does), so
        readers find its columns.
    tasks
        Cut in-memory data into exactly this many tasks instead of planning by size.
    engine
        The engine that runs the tasks: None for the embedded engine on threads (the data
        is already in this process), a LocalEngine or its LocalEngineConfig.
    schema
        The Arrow schema the data is converted to (pandas, dicts: as
        ``pyarrow.Table.from_pandas`` and ``pyarrow.table`` take it) or cast to (Arrow data,
        streams); the schema of an empty iterator.
    index, preserve_index
        A pandas index, as ``pandas.DataFrame.to_parquet(index=...)`` (or pyarrow's
        ``preserve_index``) writes it: None (default) keeps a RangeIndex as metadata and
        other indexes as columns, True writes every index as columns, False none. (A
        RangeIndex other than 0, 1, 2, ... is written as a column when partitioning
        reorders the rows, so each row keeps its label.)

    Returns
    -------
    WriteResult
        The destination, the committer, rows, files, bytes, partitions and the job's run.
    """
    request = translate("write_dataset", locals())
    check_progress(progress)
    parts = request.partition_by
    check_writer(request.options)
    source = as_source(data, input_options(index, preserve_index, schema, parts))
    store, output_committer = prepare_write(request, source.schema)
    source, parts = keyed_source(source, output_committer, parts)
    options = committer_write_options(request.options, output_committer)
    runner = _engine(engine)
    workers = max(1, runner.workers)
    limits = name_limits(store)  # partition values must make names the destination holds
    empty = source.table is not None and source.table.num_rows == 0
    title = f"writing {shorten(store.full_url())}"
    if empty and writes_schema_file(store, output_committer, request.mode, request.options.format):
        work = functools.partial(write_schema_file, schema=source.schema, options=options)
        with task_progress(title, 1, progress, on_event) as events:
            run = runner.run_job(
                output_committer, [work], on_event=events, before_job_commit=before_job_commit
            )
        return write_result(store, output_committer, run, {"tasks": 1, "rows": 0})
    if source.table is not None:
        plan = plan_tasks(source.table, parts, options, workers, tasks, limits)
        if not runner.shares_store:
            # tasks in other processes get their own rows, not the whole table each
            plan.tasks = [gather_pieces(pieces) for pieces in plan.tasks]
        with encode_pool(runner) as pool:
            works = [
                functools.partial(
                    write_pieces,
                    schema=source.schema,
                    partition_by=parts,
                    options=options,
                    pieces=pieces,
                    # fewer tasks than workers (small data): each encodes partitions side by side
                    threads=max(1, workers // len(plan.tasks)),
                    pool=pool,
                )
                for pieces in plan.tasks
            ]
            with task_progress(title, len(works), progress, on_event) as events:
                run = runner.run_job(
                    output_committer, works, on_event=events, before_job_commit=before_job_commit
                )
        return write_result(store, output_committer, run, plan.stats)
    if tasks is not None:
        raise ConfigError(
            "tasks= cuts data in memory; a stream is cut into one task per spilled segment"
        )
    assert source.batches is not None
    feeder = StreamFeeder(
        source.batches,
        source.schema,
        parts,
        options,
        workers,
        limits=limits,
        schema_file=writes_schema_file(
            store, output_committer, request.mode, request.options.format
        ),
        replayable=stream_needs_spill(runner),
    )
    with task_progress(title, None, progress, on_event) as events:  # as many as segments
        return write_fed(store, output_committer, runner, feeder, events, before_job_commit)


@contextlib.contextmanager
def encode_pool(engine: LocalEngine) -> Iterator[ThreadPoolExecutor | None]:
    """One set of encoding threads, as many as the engine's workers, shared by every task of
    a job whose tasks run on this process's threads: a task that finishes first leaves its
    cores to the partitions still encoding in the others, so no core idles at the end while
    the last task's files encode one by one (with a pool per task, or none). None when the
    tasks run elsewhere (processes, inline), or on one worker."""
    if engine.config.executor != "threads" or engine.workers < 2:
        yield None
        return
    pool = ThreadPoolExecutor(engine.workers, "dataferry-encode")
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def stream_needs_spill(engine: LocalEngine) -> bool:
    """Whether a stream's segments are spilled so that more than one attempt can read them:
    attempts in other processes (which cannot take rows from this one's memory), speculative
    copies, or failures injected to be retried. Otherwise rows go straight through."""
    c = engine.config
    return not engine.shares_store or c.speculation or bool(c.speculate_tasks or c.failures)


def _engine(engine: LocalEngine | LocalEngineConfig | None) -> LocalEngine:
    if engine is None:
        # the data is already in this process: threads copy nothing, and pyarrow releases the
        # GIL while it encodes and writes (a process pool would first pickle every row)
        return LocalEngine(executor="threads")
    if isinstance(engine, LocalEngineConfig):
        return LocalEngine(engine)
    if not isinstance(engine, LocalEngine):
        raise ConfigError(
            f"engine must be a LocalEngine or LocalEngineConfig, got {type(engine).__name__}"
        )
    return engine


def prepare_write(
    request: WriteRequest, schema: pa.Schema, *, schema_known: bool = True
) -> tuple[Store, Committer]:
    """Everything a write does on the driver before any task runs: check the partition
    columns, open the destination, build the committer for the write mode, tell it the
    data's schema (unless `schema_known` is False: `schema` then only names the columns known,
    and each task's own data tells), and check the destination early (the mode itself is
    decided when the job commits, holding the destination's claim)."""
    check_partition_columns(schema, request.partition_by)
    store, output_committer = request_committer(request)
    if schema_known:
        output_committer.prepare_input(schema, request.partition_by)
    try:
        prepare_destination(store, output_committer.write_mode)
    except DestinationError as e:
        raise_in_callers_words(request.mode_words, e)
    check_existing_data(store, output_committer, request, schema, schema_known=schema_known)
    return store, output_committer


def keyed_source(
    source: Source, committer: Committer, partition_by: tuple[str, ...]
) -> tuple[Source, tuple[str, ...]]:
    """The data and the columns to split it by, as the committer partitions it
    (`partition_keys`: derived key columns added, e.g. Iceberg's `ts_day`); as given when
    it splits by the raw values of `partition_by`."""
    keys = committer.partition_keys(source.schema, partition_by)
    if keys is None:
        return source, partition_by
    if source.table is not None:
        return Source(keys.schema, table=keys.add(source.table)), keys.partition_by
    assert source.batches is not None
    batches = (keys.add(b) for b in source.batches)
    return Source(keys.schema, batches=batches), keys.partition_by


def check_existing_data(
    store: Store,
    committer: Committer,
    request: WriteRequest,
    schema: pa.Schema,
    *,
    schema_known: bool = True,
) -> None:
    """Refuse, on the driver, a write that keeps a plain data set's files but does not fit
    them (`existing.check_existing`: another partition layout, other column types; the
    types only when `schema_known`), in the caller's words."""
    try:
        check_existing(
            store,
            committer,
            request.mode,
            schema,
            request.partition_by,
            fmt=request.options.format,
            schema_known=schema_known,
            schema_mode=request.schema_mode,
        )
    except ConfigError as e:
        message = in_callers_words(request.mode_words, str(e))
        if message == str(e):
            raise
        raise ConfigError(message) from e


def committer_write_options(options: WriteOptions, committer: Committer) -> WriteOptions:
    """The write's options as its committer needs its files (a table's partition columns
    kept in the files, an empty partition value kept apart from null)."""
    if committer.keeps_partition_columns and not options.keep_partition_columns:
        options = dataclasses.replace(options, keep_partition_columns=True)
    if committer.keeps_empty_partition_values and not options.keep_empty_partition_values:
        options = dataclasses.replace(options, keep_empty_partition_values=True)
    return options


def request_committer(request: WriteRequest) -> tuple[Store, Committer]:
    """The destination's store and the committer the write asks for (nothing is touched)."""
    store = open_destination(request.dest, request.filesystem, request.storage_options)
    return store, write_committer(request, store)


def write_committer(request: WriteRequest, store: Store) -> Committer:
    """The committer a write asks for, on its destination's store. With pyarrow's
    `overwrite_or_ignore`, a committer that refuses a file name already there (manifest) is
    told to delete the target first, as pyarrow overwrites it."""
    options = dict(request.committer_options)
    name = choose_committer(store) if request.committer == "auto" else request.committer
    fields = {f.name for f in dataclasses.fields(config_type(name))}
    found = spec(name)
    if request.schema_mode is not None and found is not None and found.family == "table":
        # a table's own schema evolution, where its committer has one (Delta's schema_mode)
        if "schema_mode" not in fields:
            raise ConfigError(f"committer {name!r} takes no schema_mode")
        options.setdefault("schema_mode", request.schema_mode)
    if request.replace_same_names and "delete_target_files" in fields:
        options.setdefault("delete_target_files", True)
    return make_committer(
        request.committer,
        store,
        mode=request.mode,
        allow_unsafe_rename=request.allow_unsafe_rename,
        **options,
    )


def raise_in_callers_words(
    mode_words: tuple[tuple[str, str], ...], error: DestinationError
) -> NoReturn:
    """Raise `error` again, telling its caller what to write in the caller's own words
    (`WriteRequest.mode_words`)."""
    message = in_callers_words(mode_words, str(error))
    if message == str(error):
        raise error
    raise DestinationError(message) from error


def services_tasks_reach(committer: Committer) -> list[tuple[str, str]]:
    """The network services the committer's tasks must reach, as (address, what) pairs, as its
    config declares them (``config.services_tasks_reach()``; none when it declares nothing)."""
    declared = getattr(getattr(committer, "config", None), "services_tasks_reach", None)
    return [] if declared is None else [(str(a), str(w)) for a, w in declared()]


def check_services_reachable(committer: Committer, task_hosts: Sequence[str]) -> None:
    """Refuse, before any task runs, a service of the committer that tasks on `task_hosts`
    cannot connect to (a wildcard address, or loopback with tasks on other hosts)."""
    for address, what in services_tasks_reach(committer):
        check_reachable(address, task_hosts, what)


def open_destination(
    dest: str | os.PathLike[str] | Store,
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> Store:
    """The destination's store, from a URL or path (through `filesystem` if given)."""
    if isinstance(dest, Store):
        if filesystem is not None or storage_options:
            raise ConfigError("dest is an open Store: filesystem and storage_options do not apply")
        return dest
    if not isinstance(dest, (str, os.PathLike)):
        raise ConfigError(
            f"dest must be a path or URL (or a Store), got {type(dest).__name__}; "
            "to write through a file system object, pass it as filesystem= and a path as dest"
        )
    extra: dict[str, Any] = {}
    if filesystem is not None:
        extra["filesystem"] = filesystem
    if storage_options:
        extra["storage_options"] = storage_options
    return open_store(dest, **extra)


def write_fed(
    store: Store,
    committer: Committer,
    engine: Any,
    feeder: Any,
    on_event: EventHook | None = None,
    before_job_commit: Callable[[Any], None] | None = None,
) -> WriteResult:
    """Run a job whose tasks `feeder` produces while it runs (a StreamFeeder, a Dask
    PartitionFeed: `start`, `on_event`, `stop`, `stats`) on `engine`, and say what it wrote.
    The feeder hears every event before `on_event` does, and is stopped however the job ends."""

    def events(event: str, task: int, attempt: int) -> None:
        feeder.on_event(event, task, attempt)
        if on_event is not None:
            on_event(event, task, attempt)

    try:
        run = engine.run_job(
            committer, feeder.start(), on_event=events, before_job_commit=before_job_commit
        )
    finally:
        feeder.stop()
    return write_result(store, committer, run, feeder.stats())


def write_result(
    store: Store, committer: Committer, run: JobRun, stats: dict[str, Any] | None = None
) -> WriteResult:
    task_results = [r for r in run.results.values() if r is not None]
    return WriteResult(
        dest=store.full_url(),
        committer=committer.name,
        job_id=str(run.job.job_id),
        rows=sum(r["rows"] for r in task_results),
        files=run.commit.files,
        bytes=run.commit.bytes,
        partitions=len({p for r in task_results for p in r["partitions"]}),
        run=run,
        stats=dict(stats or {}),
    )


def check_partition_columns(schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
    """Fail on the driver, before any task runs, for columns the data does not have."""
    for col in partition_by:
        if col not in schema.names:
            raise ConfigError(
                f"partition column {col!r} is not in the data; columns: {', '.join(schema.names)}"
            )
    if partition_by and len(set(partition_by)) == len(schema.names):
        raise ConfigError("every column is a partition column: no data would be left to write")
