"""Ray integration: `CommitDatasink`, a Ray Data datasink that commits through dataferry.

`on_write_start` prepares the destination, sets the job up and starts the commit coordinator
as a Ray actor; each `write` call is one task attempt (its number comes from the coordinator, so
an attempt Ray retries gets a new one): set up, write the blocks, ask the coordinator, then
commit or abort; `on_write_complete` commits the job from the attempts' commit messages and
`on_write_failed` aborts it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from ..commit.coordinator import CommitCoordinator
from ..commit.protocol import JobContext, TaskCommitMessage, committer_for
from ..dataset.options import WriteOptions
from ..dataset.task import write_rows
from ..dataset.write import WriteResult, prepare_write
from .attempt import AttemptDied, AttemptFailure, TaskOutput


class _Coordinator:
    """The commit coordinator plus attempt numbering, living in a Ray actor."""

    def __init__(self) -> None:
        self.coordinator = CommitCoordinator()
        self.attempts: dict[int, int] = {}

    def next_attempt(self, task: int) -> int:
        n = self.attempts.get(task, 0)
        self.attempts[task] = n + 1
        return n

    def can_commit(self, task: int, attempt: int) -> bool:
        return self.coordinator.can_commit(task, attempt)

    def attempt_failed(self, task: int, attempt: int) -> None:
        self.coordinator.attempt_failed(task, attempt)

    def task_committed(self, task: int, attempt: int) -> None:
        self.coordinator.task_committed(task, attempt)


try:
    from ray.data import Datasink as _Base
except ImportError:  # ray is optional: the class is usable only with it installed
    _Base = object  # type: ignore[assignment,misc]


class CommitDatasink(_Base):  # type: ignore[misc,valid-type]
    def __init__(
        self,
        dest: str | os.PathLike[str],
        *,
        partition_by: Sequence[str] = (),
        format: str = "parquet",
        committer: str = "auto",
        mode: str = "error",
        committer_options: dict[str, Any] | None = None,
        failures: Sequence[AttemptFailure] = (),
    ) -> None:
        self.dest = os.fspath(dest)
        self.partition_by = tuple(partition_by)
        self.format = format
        self.committer_name = committer
        self.mode = mode
        self.committer_options = committer_options
        self.failures = {(f.task, f.attempt): f.when for f in failures}
        self.job: JobContext | None = None
        self.coordinator: Any = None
        self.result: Any = None

    def get_name(self) -> str:
        return "dataferry"

    @property
    def supports_distributed_writes(self) -> bool:
        return True

    # --- driver ----------------------------------------------------------------------------

    def on_write_start(self, schema: Any = None) -> None:
        import pyarrow as pa
        import ray

        schema = schema if isinstance(schema, pa.Schema) else pa.schema([])
        if self.partition_by and not schema.names:
            schema = pa.schema([(c, pa.string()) for c in self.partition_by] + [("_", pa.null())])
        _store, com = prepare_write(
            self.dest,
            schema,
            self.partition_by,
            self.format,
            self.committer_name,
            self.mode,
            self.committer_options,
        )
        self.job = com.new_job()
        com.setup_job(self.job)
        self.coordinator = ray.remote(_Coordinator).options(num_cpus=0).remote()

    def on_write_complete(self, write_result: Any) -> None:
        assert self.job is not None
        returns = getattr(write_result, "write_returns", write_result)
        messages = sorted((m for m in returns if m is not None), key=lambda m: m.task_id)
        com = committer_for(self.job)
        run = com.commit_job(self.job, messages)
        self.result = WriteResult(
            dest=self.job.store.full_url(),
            committer=com.name,
            job_id=str(self.job.job_id),
            rows=getattr(write_result, "num_rows", 0),
            files=run.files,
            bytes=run.bytes,
            partitions=len({f.rsplit("/", 1)[0] for m in messages for f in m.files if "/" in f}),
            run=run,  # type: ignore[arg-type]
        )

    def on_write_failed(self, error: Exception) -> None:
        if self.job is not None:
            committer_for(self.job).abort_job(self.job)

    # --- one task attempt ------------------------------------------------------------------

    def write(self, blocks: Iterable[Any], ctx: Any) -> TaskCommitMessage | None:
        import pyarrow as pa
        import ray

        assert self.job is not None
        index = int(ctx.task_idx)
        attempt = ray.get(self.coordinator.next_attempt.remote(index))
        task = self.job.task(index, attempt)
        com = committer_for(task)
        try:
            com.setup_task(task)
        except BaseException:
            ray.get(self.coordinator.attempt_failed.remote(index, attempt))
            raise  # nothing of this run's to clean: the attempt id may be another run's
        try:
            tables = [
                b if isinstance(b, pa.Table) else pa.Table.from_pandas(b, preserve_index=False)
                for b in blocks
            ]
            out = TaskOutput(com, task)
            if tables:
                table = pa.concat_tables(tables)
                write_rows(
                    out, table.schema, self.partition_by, WriteOptions(format=self.format), [table]
                )
            if self.failures.get((index, attempt)) == "after_write":
                raise AttemptDied(f"{task.attempt_id}: injected failure after writing")
            if not ray.get(self.coordinator.can_commit.remote(index, attempt)):
                com.abort_task(task)
                return None
            message = com.commit_task(task, tuple(out.written))
        except BaseException:
            ray.get(self.coordinator.attempt_failed.remote(index, attempt))
            try:
                com.abort_task(task)
            except Exception:
                pass
            raise
        ray.get(self.coordinator.task_committed.remote(index, attempt))
        return message
