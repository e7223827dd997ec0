"""One Daft write call as one task attempt of the job session, on whichever worker runs it.

Daft calls `DataSink.write` with a stream of micropartitions and tells it nothing about which
task it is, nor which try. So each call is a task of its own, named by a random id (53 bits:
two of a million calls share one with odds of 1 in 18,000; a shared id is caught where the
committer keeps a work directory, and the call takes another): it writes its rows through one
`TaskWriter`, commits its attempt and hands the commit message back to Daft. A rerun of the
same input is then another task, and only the results Daft hands `finalize` are committed:
an attempt whose result Daft dropped (a failed or retried call, a lost worker) is left out of
the job commit, which removes it with everything else the job did not commit.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..commit.job.session import Job, TaskAttempt
from ..commit.protocol import TaskCommitMessage
from ..dataset.options import WriteOptions
from ..dataset.task import TaskWriter
from ..errors import CommitError, ConfigError, EngineError

if TYPE_CHECKING:
    import pyarrow as pa

TASK_ID_BITS = 53  # an id JSON keeps exactly (a float's mantissa)
ID_TRIES = 8  # ids a call tries when the committer refuses one already in use
EMPTY: dict[str, Any] = {"rows": 0, "files": 0, "bytes": 0, "partitions": []}


@dataclass(frozen=True)
class TaskDone:
    """What one write call hands back to Daft (and Daft to `finalize`): its committed
    attempt's message (None: the committer needs no task commit) and counts; no data."""

    task_id: int
    attempt: int
    message: TaskCommitMessage | None
    result: dict[str, Any]
    write_s: float
    store_stats: dict[str, Any] = field(default_factory=dict)
    committer_stats: dict[str, Any] = field(default_factory=dict)
    store_token: tuple[int, int] = (0, 0)  # `store_token` of the store it counted on


def store_token(store: Any) -> tuple[int, int]:
    """Which store object a call's statistics were counted on: the native runner's calls
    share the driver's (whose own counts then hold theirs), the Ray runner's have copies."""
    return (os.getpid(), id(store))


@dataclass(frozen=True)
class TaskPlan:
    """What every write call needs besides its rows (pickled with the sink to the workers):
    the job session, the columns rows are split by, the files' options, and the committer's
    key columns to add first (Iceberg's transforms; None: none)."""

    job: Job
    partition_by: tuple[str, ...]
    options: WriteOptions
    add_keys: Callable[[pa.Table], pa.Table] | None = None


def new_task_id() -> int:
    return secrets.randbits(TASK_ID_BITS)


def fresh_attempt(job: Job) -> TaskAttempt:
    """A set-up attempt of a new task (another id if the committer finds the drawn one in
    use: a work directory of that name already exists)."""
    refused = ""
    for _ in range(ID_TRIES):
        attempt = job.task(new_task_id(), 0)
        try:
            attempt.setup()
        except CommitError as e:
            refused = str(e)
            continue
        return attempt
    raise EngineError(f"job {job.job_id}: no free task id in {ID_TRIES} draws: {refused}")


def write_task(
    plan: TaskPlan,
    tables: Iterable[pa.Table],
    *,
    die: Callable[[TaskAttempt, str], None] | None = None,
) -> TaskDone:
    """Write `tables` (one Daft write call's rows) as one task attempt and commit it.

    An ordinary error removes what the attempt wrote and is raised (Daft fails or retries
    the call). A crash (the process died) leaves it for the job commit or `dataferry cleanup`.
    `die`: tests only, called with the attempt and "written" (its files written, before its
    task commit) and "committed" (after it): a test's crash there is a worker dying."""
    started = time.perf_counter()
    attempt = fresh_attempt(plan.job)
    store = attempt.ctx.job.store
    before = store.stats.snapshot()
    writer: TaskWriter | None = None
    try:
        schema: pa.Schema | None = None
        for table in tables:
            if table.num_rows == 0:
                continue
            if plan.add_keys is not None:
                table = plan.add_keys(table)
            if writer is None:
                schema = table.schema
                writer = TaskWriter(attempt, schema, plan.partition_by, plan.options)  # type: ignore[arg-type]
            elif not table.schema.equals(schema):
                table = conform(table, schema)  # type: ignore[arg-type]
            writer.write(table)
        result = dict(EMPTY) if writer is None else writer.close()
        writer = None
        if die is not None:
            die(attempt, "written")
        message = attempt.commit() if attempt.needs_commit() else None
        if die is not None:
            die(attempt, "committed")
    except Exception:
        if writer is not None:
            writer.abandon()
        attempt.abort(quiet=True)
        raise
    return TaskDone(
        task_id=attempt.task_index,
        attempt=attempt.attempt_number,
        message=message,
        result=result,
        write_s=time.perf_counter() - started,
        store_stats=store.stats.diff(before),
        committer_stats=attempt.committer.stats.snapshot(),
        store_token=store_token(store),
    )


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A later micropartition in the schema of the call's first one (the files' schema)."""
    if set(table.column_names) != set(schema.names):
        raise ConfigError(
            f"a micropartition's columns {table.column_names} differ from the write call's "
            f"first one's {schema.names}"
        )
    try:
        return table.select(schema.names).cast(schema)
    except Exception as e:  # pyarrow's ArrowInvalid / ArrowNotImplementedError
        raise ConfigError(
            f"a micropartition's schema does not match the write call's first one: {e}"
        ) from e


def arrow_tables(micropartitions: Iterable[Any]) -> Iterator[pa.Table]:
    """Daft's micropartitions as Arrow tables, converted one at a time as they come (the
    first one's columns checked: `check_columns`)."""
    checked = False
    for mp in micropartitions:
        table = mp.to_arrow()
        if not checked:
            check_columns(table.schema)
            checked = True
        yield table


def check_columns(schema: pa.Schema) -> pa.Schema:
    """Refuse a column Daft holds as Python objects (its type for what it cannot hold in
    Arrow, such as a dictionary-encoded column): Arrow would write it as pickled bytes in an
    extension type that no other reader understands."""
    import pyarrow as pa

    for f in schema:
        if isinstance(f.type, pa.ExtensionType) and f.type.extension_name.startswith("daft."):
            raise ConfigError(
                f"column {f.name!r} holds Python objects in Daft ({f.type.extension_name}), "
                "which no other reader could read back; cast it to a Daft type first, e.g. "
                f"df.with_column({f.name!r}, df[{f.name!r}].cast(daft.DataType.string()))"
            )
    return schema
