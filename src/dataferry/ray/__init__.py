"""Ray integration: `CommitDatasink`, a Ray Data datasink that writes all or nothing.

`ds.write_datasink(CommitDatasink(path, partition_cols=[...]))`: `on_write_start` (on the
driver, when the first input arrives) prepares the destination and sets the job up; each
`write` call is one task attempt that writes its blocks as they come through one `TaskWriter`
(one file per partition, rolling at the size limits) and commits if the commit coordinator (a
Ray actor, one per driver: `coordinator.py`) agrees; `on_write_complete` commits the job from
the committed tasks' messages, which the coordinator keeps, and `on_write_failed` aborts it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..commit.base import Committer
from ..commit.job.session import Job, open_job
from ..commit.protocol import JobContext
from ..dataset.formats import check_writer
from ..dataset.options import WriteOptions, translate
from ..dataset.params import write_params
from ..dataset.tables import delta_table_exists, delta_write, resolved
from ..dataset.task import TaskWriter
from ..dataset.write import WriteResult, committer_write_options, prepare_write
from ..dataset.write import write_result as _write_result  # on_write_complete has Ray's name
from ..engine.attempt import AttemptFailure, TaskOutput
from ..engine.local import JobRun
from ..errors import ConfigError, DestinationError
from ..extras import MissingDependency
from ..stats import IOStatistics
from .coordinator import (
    FAILURE_POINTS,
    CoordinatorHandle,
    RayAttemptReport,
    coordinator_actor,
    finish_job,
    run_attempt_on_ray,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import Datasink as _Base
    from ray.data.block import Block
    from ray.data.datasource.datasink import WriteResult as RayWriteResult
else:
    try:
        from ray.data import Datasink as _Base
    except ImportError:  # ray is optional: the class is usable only with it installed
        _Base = object


@write_params("ray.CommitDatasink")
class CommitDatasink(_Base):
    """A Ray Data datasink that writes a partitioned data set through a dataferry committer.

    Use it with ``Dataset.write_datasink``. Each write task is one task attempt; a task Ray
    retries (``ray_remote_args={"max_retries": ..., "retry_exceptions": True}``) is a new
    attempt, and the commit coordinator lets exactly one attempt of each task commit. The
    output appears when the job commits, after the last task, or not at all.

    Parameters
    ----------
    path
        A path or URL (``s3://``, ``gs://``, ``abfs://``, ``memory://``, ``file://``), or a
        path inside ``filesystem`` (Ray's name for dataferry's ``dest``); the workers must
        reach it.
    min_rows_per_write
        Ray Data buffers input blocks until a write call has at least this many rows (the
        last call may have fewer): fewer, larger write tasks, so fewer files. None (default):
        blocks are gathered by size instead, until a call has `WRITE_BUNDLE_BYTES` (or
        ``target_file_size``, if smaller) of them in memory (`min_bytes_per_write`), so small
        blocks do not each make a file per partition.

    Attributes
    ----------
    result : WriteResult or None
        After ``write_datasink`` returns: the destination, the committer, rows, files,
        bytes, partitions and the job's run.

    Notes
    -----
    The blocks of one write call go to one set of files, so they must share a schema (a
    later block is cast to the first one's); a write call's blocks are never joined in
    memory: each is split by partition and written as it arrives.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        partition_cols: Sequence[str] | None = None,
        format: str = "parquet",
        committer: str = "auto",
        mode: str | None = None,
        filesystem: Any = None,
        storage_options: dict[str, Any] | None = None,
        min_rows_per_write: int | None = None,
        committer_options: dict[str, Any] | None = None,
        format_options: dict[str, Any] | None = None,
        max_rows_per_file: int | None = None,
        min_rows_per_group: int | None = None,
        max_rows_per_group: int | None = None,
        max_open_files: int | None = None,
        basename_template: str | None = None,
        target_file_size: int | None = None,
        allow_unsafe_rename: bool = False,
        partition_by: Sequence[str] | None = None,
        **writer_options: Any,
    ) -> None:
        arguments = dict(locals())  # the call, as given: translated in one place
        if _Base is object:
            raise MissingDependency("ray", "dataferry.ray.CommitDatasink")
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigError(
                f"path must be a path or URL, got {type(path).__name__}; "
                "to write through a file system object, pass it as filesystem="
            )
        if min_rows_per_write is not None and (
            isinstance(min_rows_per_write, bool)
            or not isinstance(min_rows_per_write, int)
            or min_rows_per_write < 1
        ):
            raise ConfigError(
                f"min_rows_per_write must be an integer >= 1 or None, got {min_rows_per_write!r}"
            )
        self.path = os.fspath(path)
        self.request = translate("ray.CommitDatasink", {**arguments, "path": self.path})
        self.partition_cols = self.request.partition_by
        self.options: WriteOptions = self.request.options
        check_writer(self.options)  # a value pyarrow refuses fails here, not in a task
        self._min_rows_per_write = min_rows_per_write
        self._failures: dict[tuple[int, int], str] = {}  # tests only: _inject_failures
        self.job: JobContext | None = None
        self.result: WriteResult | None = None
        # set by on_write_start; the committer and the clock stay on the driver
        self._committer: Committer | None = None
        self._session: Job | None = None
        self._coordinator: CoordinatorHandle | None = None
        self._started = 0.0
        # the columns the tasks split rows by, and the committer's key columns added to the
        # rows first (`Committer.partition_keys`: Iceberg's transforms), set by on_write_start
        self._split_by: tuple[str, ...] = self.partition_cols
        self._add_keys: Any = None

    # --- what Ray Data reads ---------------------------------------------------------------

    def get_name(self) -> str:
        return "dataferry"

    @property
    def supports_distributed_writes(self) -> bool:
        return True

    @property
    def min_rows_per_write(self) -> int | None:
        """Rows Ray Data gathers (in whole blocks) for each `write` call; None: Ray's choice."""
        return self._min_rows_per_write

    @property
    def min_bytes_per_write(self) -> int | None:
        """In-memory bytes Ray Data gathers (in whole blocks) for each `write` call when
        `min_rows_per_write` is not given: files planned by size, not one per partition per
        block. (Ray reads it when the write is planned; a Ray without it ignores it.)"""
        if self._min_rows_per_write is not None:
            return None
        return min(WRITE_BUNDLE_BYTES, self.options.target_file_size)

    def __getstate__(self) -> dict[str, Any]:
        # what a write task needs: the job (with its store), the options, the coordinator's
        # handle; not the driver's committer (its statistics stay on the driver)
        state = self.__dict__.copy()
        state["_committer"] = None
        state["_session"] = None
        return state

    # --- driver ----------------------------------------------------------------------------

    def on_write_start(self, schema: pa.Schema | Any = None) -> None:
        """Prepare the destination, set the job up and start the commit coordinator."""
        self._started = time.perf_counter()
        self.result = None
        actor = coordinator_actor()  # first: its process starts while the destination is checked
        columns, known = _driver_schema(schema, self.partition_cols)
        _store, committer = prepare_write(self.request, columns, schema_known=known)
        keys = committer.partition_keys(columns, self.partition_cols) if known else None
        self._split_by = self.partition_cols if keys is None else keys.partition_by
        self._add_keys = None if keys is None else keys.add
        # the files as the committer needs them (a table's partition columns kept in them)
        self.options = committer_write_options(self.request.options, committer)
        self._session = session = open_job(committer)
        job = session.context
        self._committer, self.job = committer, job
        self._coordinator = CoordinatorHandle(actor, str(job.job_id))

    def on_write_complete(self, write_result: RayWriteResult[RayAttemptReport]) -> None:
        """Commit the job from the committed tasks' messages (kept by the coordinator)."""
        if self._coordinator is None:  # no input at all: Ray never started the write
            self.on_write_start(None)
        assert self._session is not None and self._coordinator is not None and self._committer
        assert self.job is not None
        write_s = time.perf_counter() - self._started
        summary = finish_job(self._coordinator)
        self._coordinator = None
        committed = [summary.committed[t] for t in sorted(summary.committed)]
        messages = [c.message for c in committed]
        committer = self._committer
        commit = self._session.commit(messages)
        job_commit_s = self._session.commit_s
        store_stats = IOStatistics(committer.store.stats.snapshot())
        for r in getattr(write_result, "write_returns", write_result):
            if isinstance(r, RayAttemptReport):
                store_stats.merge(r.store_stats)
                committer.stats.merge(r.committer_stats)
        results = {t: c.result for t, c in summary.committed.items()}
        run = JobRun(
            job=self.job,
            commit=commit,
            messages=messages,
            results=results,
            attempts=summary.attempts,
            failed_attempts=summary.failed_attempts,
            speculative_attempts=0,
            denied_commits=summary.denied_commits,
            write_s=write_s,
            job_commit_s=job_commit_s,
            wall_s=time.perf_counter() - self._started,
            task_commit_s=0.0,
            store_stats=store_stats,
            committer_stats=committer.stats,
        )
        self.result = _write_result(
            self.job.store, committer, run, {"skipped_attempts": summary.skipped_attempts}
        )

    def on_write_failed(self, error: Exception) -> None:
        """Abort the job: nothing of it stays in the destination."""
        if self._coordinator is not None:
            try:
                finish_job(self._coordinator)
            except Exception:
                pass
            self._coordinator = None
        if self._session is not None:
            self._session.abort()

    # --- one write task: one task attempt --------------------------------------------------

    def write(self, blocks: Iterable[Block], ctx: Any) -> RayAttemptReport:
        """Write one task's blocks as one attempt and commit it if the coordinator agrees;
        the attempt's statistics (the coordinator keeps its commit message)."""
        assert self.job is not None and self._coordinator is not None, "no on_write_start"
        work = functools.partial(
            _write_blocks,
            blocks=blocks,
            partition_by=self._split_by,
            options=self.options,
            add_keys=self._add_keys,
        )
        return run_attempt_on_ray(
            self.job, int(ctx.task_idx), self._coordinator, work, self._failures
        )


@write_params("ray.DeltaDatasink")
class DeltaDatasink(CommitDatasink):
    """A Ray Data datasink that writes a Delta table with deltalake's arguments (as
    `dataferry.write_deltalake`), through the ``delta`` committer: each write task's files in
    place, one Delta transaction when the last task is done, nothing of a failed write left.

    ``result`` is None after an ignored write.

    Parameters
    ----------
    table_uri
        A path or URL (local or ``s3://``), or a ``deltalake.DeltaTable`` (deltalake's
        ``table_or_uri``).
    partition_cols
        Ray's name for ``partition_by``; give one of them.
    min_rows_per_write, **writer_options
        As in `CommitDatasink`.
    """

    def __init__(
        self,
        table_uri: Any,
        *,
        partition_cols: Sequence[str] | None = None,
        mode: str = "error",
        storage_options: dict[str, str] | None = None,
        name: str | None = None,
        description: str | None = None,
        configuration: dict[str, str | None] | None = None,
        schema_mode: str | None = None,
        min_rows_per_write: int | None = None,
        committer_options: dict[str, Any] | None = None,
        partition_by: str | Sequence[str] | None = None,
        predicate: str | None = None,
        writer_properties: Any = None,
        commit_properties: Any = None,
        post_commithook_properties: Any = None,
        **writer_options: Any,
    ) -> None:
        if partition_cols is not None and partition_by is not None:
            raise ConfigError("give partition_cols or partition_by, not both")
        self.delta = delta_write(
            table_uri,
            partition_by=partition_cols if partition_by is None else partition_by,
            mode=mode,
            storage_options=storage_options,
            name=name,
            description=description,
            configuration=configuration,
            schema_mode=schema_mode,
            committer_options=committer_options,
            predicate=predicate,
            writer_properties=writer_properties,
            commit_properties=commit_properties,
            post_commithook_properties=post_commithook_properties,
        )
        given = self.delta.arguments()
        super().__init__(
            self.delta.dest,
            partition_cols=given.pop("partition_by"),
            min_rows_per_write=min_rows_per_write,
            **given,
            **{**self.delta.writer_options, **writer_options},
        )
        self.ignored = False

    def get_name(self) -> str:
        return "dataferry-delta"

    def on_write_start(self, schema: pa.Schema | Any = None) -> None:
        self.ignored = self.delta.ignore and delta_table_exists(self.delta)
        if self.ignored:
            return
        if not self.delta.partition_given:  # deltalake's: an existing table's partitioning
            self.delta = resolved(self.delta)
            self.partition_cols = self.delta.partition_by
            self.request = dataclasses.replace(self.request, partition_by=self.delta.partition_by)
        try:
            super().on_write_start(schema)
        except DestinationError:
            if not self._table_appeared():
                raise

    def write(self, blocks: Iterable[Block], ctx: Any) -> RayAttemptReport | None:
        return None if self.ignored else super().write(blocks, ctx)

    def on_write_complete(self, write_result: RayWriteResult[RayAttemptReport]) -> None:
        if self.ignored:
            self.result = None
            return
        try:
            super().on_write_complete(write_result)
        except DestinationError as e:
            self.on_write_failed(e)  # the job's files go, whichever way it ends
            if not self._table_appeared():
                raise

    def _table_appeared(self) -> bool:
        """After a refusal: "ignore", and the table was made while this write ran."""
        self.ignored = self.delta.ignore and delta_table_exists(self.delta)
        self.result = None
        return self.ignored


ENCODE_THREADS = min(4, os.cpu_count() or 1)
# in-memory bytes of blocks gathered for one write call by default: fewer, larger files than a
# call per block, while a data set of a few bundles per worker still keeps every worker busy
# (a task encodes its partitions on ENCODE_THREADS threads besides)
WRITE_BUNDLE_BYTES = 64 << 20


def _write_blocks(
    out: TaskOutput,
    *,
    blocks: Iterable[Block],
    partition_by: tuple[str, ...],
    options: WriteOptions,
    add_keys: Any = None,
) -> dict[str, Any]:
    """A write task's work: each block (pandas ones converted as they come; `add_keys`: the
    committer's key columns added) split by partition and written through one TaskWriter;
    the task's result (rows, files, bytes, partitions)."""
    from ray.data.block import BlockAccessor

    writer: TaskWriter | None = None
    schema: pa.Schema | None = None
    try:
        for block in blocks:
            table = BlockAccessor.for_block(block).to_arrow()
            if table.num_rows == 0:
                continue
            if add_keys is not None:
                table = add_keys(table)
            if writer is None:
                schema = table.schema
                # as Ray's own Parquet writer does, partitions are encoded on several threads
                writer = TaskWriter(out, schema, partition_by, options, ENCODE_THREADS)
            elif not table.schema.equals(schema):
                table = _conform(table, schema)  # type: ignore[arg-type]
            writer.write(table)
        if writer is None:
            return {"rows": 0, "files": 0, "bytes": 0, "partitions": []}
        return writer.close()
    except BaseException:
        if writer is not None:
            writer.abandon()
        raise


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A later block in the schema of the task's first block (the files' schema)."""
    if set(table.column_names) != set(schema.names):
        raise ConfigError(
            f"a block's columns {table.column_names} differ from the write task's first "
            f"block's {schema.names}"
        )
    try:
        return table.select(schema.names).cast(schema)
    except Exception as e:  # pyarrow's ArrowInvalid / ArrowNotImplementedError
        raise ConfigError(
            f"a block's schema does not match the write task's first block: {e}"
        ) from e


def _driver_schema(schema: Any, partition_by: tuple[str, ...]) -> tuple[pa.Schema, bool]:
    """The schema Ray hands `on_write_start` (Arrow's, a pandas block's names and types, or
    None) as a pyarrow schema for the driver's checks of the partition columns, and whether
    it is the data's own (Arrow's: the committer is told it; otherwise only its names are
    known, and a table takes its schema from the files)."""
    import pyarrow as pa

    if isinstance(schema, pa.Schema):
        return schema, True
    names = list(getattr(schema, "names", None) or ())
    if not names:
        # nothing known yet: each task checks its blocks for the partition columns
        names = [*partition_by, "_"]
    return pa.schema([(n, pa.null()) for n in names]), False


def _inject_failures(
    sink: CommitDatasink, failures: Iterable[AttemptFailure | tuple[int, int, str]]
) -> None:
    """For tests only: make the given attempts fail.

    Each failure names a task (Ray's ``ctx.task_idx``), an attempt number (the coordinator
    numbers a task's attempts from 0 as Ray runs and retries it) and a point: AttemptFailure's
    ``after_write`` and ``during_commit`` (an injected death, raised as AttemptDied), or
    ``exit_after_authorised`` and ``exit_after_commit`` (the worker process exits).
    """
    chosen: dict[tuple[int, int], str] = {}
    for f in failures:
        task, attempt, when = (f.task, f.attempt, f.when) if isinstance(f, AttemptFailure) else f
        if when not in FAILURE_POINTS:
            raise ConfigError(f"unknown failure point {when!r}; use one of {FAILURE_POINTS}")
        chosen[(task, attempt)] = when
    sink._failures = chosen


__all__ = ["CommitDatasink", "DeltaDatasink"]
