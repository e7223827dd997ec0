"""`CommitSink`: a Daft `DataSink` that writes a data set or a table through any dataferry
committer, all or nothing, built on the public job session (`dataferry.open_job`) alone.

Daft's `DataFrame.write_sink(sink)` calls `start()` on the driver, then `write()` on the
workers (threads of the native runner, Ray workers of the Ray runner, which get a pickled copy
of the sink) once per stream of micropartitions, and `finalize()` on the driver with the
results of the calls it kept. Here:

    start()     check the destination and open the job (set up, driver recorded)
    write()     one task attempt per call (`task.py`): its files written, its attempt
                committed, its commit message handed back to Daft
    finalize()  `job.commit(messages)`: exactly the attempts whose results Daft kept
    abort()     what a failed `write_sink` needs (Daft has no failure callback): the job's
                files removed; `with sink:` or `dataferry.daft.write_dataset` call it

A driver killed anywhere leaves nothing visible: `dataferry cleanup` finds its job by its
driver record and rolls it back (or forward, past its intent record).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..commit.job.session import Job, open_job
from ..dataset.formats import check_writer
from ..dataset.options import WriteOptions, translate
from ..dataset.params import write_params
from ..dataset.write import (
    WriteResult,
    committer_write_options,
    prepare_write,
    raise_in_callers_words,
    write_result,
)
from ..engine.local import JobRun
from ..errors import ConfigError, DestinationError, EngineError
from ..extras import MissingDependency
from ..stats import IOStatistics
from ..store import Store
from .in_flight import IN_FLIGHT
from .task import TaskDone, TaskPlan, arrow_tables, check_columns, store_token, write_task

if TYPE_CHECKING:
    import pyarrow as pa
    from daft.io import DataSink as _Base
else:
    try:
        from daft.io import DataSink as _Base
    except ImportError:  # daft is optional: the class is usable only with it installed
        _Base = object

# the one row `finalize` returns (what `write_sink` gives back as a DataFrame)
RESULT_COLUMNS = (
    ("dest", "string"),
    ("committer", "string"),
    ("job_id", "string"),
    ("rows", "int64"),
    ("files", "int64"),
    ("bytes", "int64"),
    ("partitions", "int64"),
)


@write_params("daft.CommitSink")
class CommitSink(_Base):
    """A Daft DataSink writing a partitioned data set (or a Delta, Iceberg or Hudi table)
    through a dataferry committer: ``df.write_sink(sink)``. The output appears when
    `finalize` commits the job, after every write call, or not at all.

    Parameters
    ----------
    schema
        The frame's schema (``df.schema()``, or a pyarrow one), checked on the driver
        against the partition columns and a table's schema before any task runs. None: the
        tasks' rows tell (a table then takes its schema from the files).

    Attributes
    ----------
    result : WriteResult or None
        After `finalize`: the destination, committer, rows, files, bytes, partitions and the
        job's run.
    """

    def __init__(
        self,
        dest: str | os.PathLike[str] | Store,
        *,
        partition_by: Sequence[str] | None = None,
        format: str = "parquet",
        committer: str = "auto",
        mode: str | None = None,
        existing_data_behavior: str | None = None,
        schema: Any = None,
        filesystem: Any = None,
        storage_options: dict[str, Any] | None = None,
        committer_options: dict[str, Any] | None = None,
        format_options: dict[str, Any] | None = None,
        max_rows_per_file: int | None = None,
        min_rows_per_group: int | None = None,
        max_rows_per_group: int | None = None,
        max_open_files: int | None = None,
        basename_template: str | None = None,
        target_file_size: int | None = None,
        allow_unsafe_rename: bool = False,
        schema_mode: str | None = None,
        partitioning: Sequence[str] | None = None,
        partition_cols: Sequence[str] | None = None,
        before_job_commit: Callable[[Any], None] | None = None,
        **writer_options: Any,
    ) -> None:
        arguments = dict(locals())  # the call, as given: translated in one place
        if _Base is object:
            raise MissingDependency("daft", "dataferry.daft.CommitSink")
        if isinstance(dest, os.PathLike):
            arguments["dest"] = os.fspath(dest)
        self.request = translate("daft.CommitSink", arguments)
        self.partition_by = self.request.partition_by
        check_writer(self.request.options)  # a value pyarrow refuses fails here, not in a task
        self.schema_in = _arrow_schema(schema)
        self.before_job_commit = before_job_commit
        self.result: WriteResult | None = None
        self.job: Job | None = None  # the open job, from start() until it ends
        self.plan: TaskPlan | None = None  # what the workers need, set by start()
        self._started = 0.0
        self._store_before: dict[str, Any] = {}  # the driver store's counts at start()
        self._die: Callable[[Any, str], None] | None = None  # tests only: task.write_task's

    # --- what Daft calls ---------------------------------------------------------------------

    def name(self) -> str:
        return "dataferry"

    def schema(self) -> Any:
        """The schema of `finalize`'s one row (what `write_sink` returns)."""
        from daft.schema import Schema

        return Schema.from_pyarrow_schema(_result_schema())

    def start(self) -> None:
        """On the driver, before any write: check the destination and open the job (a job
        an earlier failed `write_sink` of this sink left open is aborted first)."""
        self.abort()
        self._started = time.perf_counter()
        self.result = None
        # the store's counts before the destination's checks (a store opened from a path
        # is new: it has counted nothing yet)
        dest = self.request.dest
        self._store_before = dest.stats.snapshot() if isinstance(dest, Store) else {}
        known = self.schema_in is not None
        schema = self.schema_in if known else _names_only(self.partition_by)
        _store, committer = prepare_write(self.request, schema, schema_known=known)
        keys = committer.partition_keys(schema, self.partition_by) if known else None
        options: WriteOptions = committer_write_options(self.request.options, committer)
        self.job = open_job(committer)
        self.plan = TaskPlan(
            job=self.job,
            partition_by=self.partition_by if keys is None else keys.partition_by,
            options=options,
            add_keys=None if keys is None else keys.add,
        )

    def write(self, micropartitions: Iterator[Any]) -> Iterator[Any]:
        """On a worker: the call's micropartitions as one task attempt, committed; one
        Daft WriteResult carrying its commit message."""
        from daft.io.sink import WriteResult as DaftWriteResult

        if self.plan is None:
            raise EngineError("CommitSink.write before start(): use df.write_sink(sink)")
        with IN_FLIGHT.call(self.plan.job.context.job_uuid):
            done = write_task(self.plan, arrow_tables(micropartitions), die=self._die)
        yield DaftWriteResult(
            result=done, bytes_written=done.result["bytes"], rows_written=done.result["rows"]
        )

    def finalize(self, write_results: list[Any]) -> Any:
        """On the driver: commit the job from the kept calls' messages (or abort it and
        raise); one row saying what was written."""
        import pyarrow as pa
        from daft.recordbatch import MicroPartition

        job = self._open_job()
        try:
            done = [r.result for r in write_results]
            if not all(isinstance(d, TaskDone) for d in done):
                raise EngineError(f"finalize got results that are not this sink's: {done!r:.200}")
            write_s = time.perf_counter() - self._started
            if self.before_job_commit is not None:
                self.before_job_commit(job)
            try:
                commit = job.commit([d.message for d in done])
            except DestinationError as e:
                raise_in_callers_words(self.request.mode_words, e)
        except Exception:
            self.abort()
            raise
        job.end()
        self.job = None
        self.result = self._result(job, done, commit, write_s)
        row = {name: [getattr(self.result, name)] for name, _ in RESULT_COLUMNS}
        return MicroPartition.from_arrow(pa.table(row, schema=_result_schema()))

    # --- a failed write ----------------------------------------------------------------------

    def abort(self) -> None:
        """Undo the job a failed ``write_sink`` left open (nothing of it stays visible); a
        job already committed or never started is left alone."""
        job, self.job = self.job, None
        if job is None:
            return
        # Daft raises as soon as one call fails, while this process's other calls may still
        # be writing: let them finish (and refuse new ones) before the abort rolls the job
        # back, so none leaves a file behind it. Calls in other processes (Ray's runner) that
        # outlive the abort are a dead attempt's leftovers, which cleanup removes.
        IN_FLIGHT.close(job.context.job_uuid)
        try:
            job.abort(quiet=True)
        finally:
            job.end()

    def __enter__(self) -> CommitSink:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None or issubclass(kind, (Exception, KeyboardInterrupt)):
            self.abort()  # after a commit there is nothing left to abort

    def __getstate__(self) -> dict[str, Any]:
        # what a worker needs is the plan (the job session pickles without its coordinator);
        # the driver's hook and result stay on the driver
        state = self.__dict__.copy()
        state["before_job_commit"] = None
        state["result"] = None
        return state

    # --- helpers -----------------------------------------------------------------------------

    def _open_job(self) -> Job:
        if self.job is None:
            raise EngineError("CommitSink.finalize without an open job: call start() first")
        return self.job

    def _result(self, job: Job, done: list[TaskDone], commit: Any, write_s: float) -> WriteResult:
        committer = job.committer
        # the driver's store counted the checks, the job's setup, commit and end, and every
        # call that ran on it (in this process); a call on a copy elsewhere brings its own
        store_stats = IOStatistics(committer.store.stats.diff(self._store_before))
        here = store_token(committer.store)
        for d in done:
            if d.store_token != here:
                store_stats.merge(d.store_stats)
            committer.stats.merge(d.committer_stats)
        messages = [d.message for d in done if d.message is not None]
        run = JobRun(
            job=job.context,
            commit=commit,
            messages=messages,
            results={d.task_id: d.result for d in done},
            attempts=len(done),
            failed_attempts=0,
            speculative_attempts=0,
            denied_commits=0,
            write_s=write_s,
            job_commit_s=job.commit_s,
            wall_s=time.perf_counter() - self._started,
            task_commit_s=0.0,
            store_stats=store_stats,
            committer_stats=committer.stats,
            setup_s=job.setup_s,
        )
        return write_result(job.store, committer, run, {"tasks": len(done), "engine": "daft"})


def _result_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([(n, getattr(pa, t)()) for n, t in RESULT_COLUMNS])


def _arrow_schema(schema: Any) -> pa.Schema | None:
    """A Daft or pyarrow schema as pyarrow's (None stays None)."""
    if schema is None:
        return None
    import pyarrow as pa

    if isinstance(schema, pa.Schema):
        return check_columns(schema)
    to_arrow = getattr(schema, "to_pyarrow_schema", None)
    if to_arrow is None:
        raise ConfigError(
            f"schema must be a Daft or pyarrow Schema (df.schema()), got {type(schema).__name__}"
        )
    return check_columns(to_arrow())


def _names_only(partition_by: tuple[str, ...]) -> pa.Schema:
    """Without the frame's schema, only the partition columns are known: each task checks
    its own rows for them."""
    import pyarrow as pa

    return pa.schema([(n, pa.null()) for n in (*partition_by, "_")])
