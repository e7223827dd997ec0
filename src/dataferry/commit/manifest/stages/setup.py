"""Job and task setup: create the attempt directories; refuse to reuse one that exists."""

from __future__ import annotations

from ....errors import AccessDenied, CommitError, DestinationError, NotFound
from ....stages import TASK_LEVEL, stage
from ...protocol import StageContext


def _create_new_directory(ctx: StageContext, path: str, what: str) -> None:
    try:
        ctx.store.stat(path)
    except NotFound:
        ctx.store.mkdirs(path)
        return
    raise CommitError(
        f"{what} directory {ctx.store.full_url(path)} already exists: {what} id reused?"
    )


@stage("job_stage_setup", "setup")
def setup_job(ctx: StageContext) -> None:
    try:
        _create_new_directory(ctx, ctx.layout.job_attempt_dir, "job attempt")
        ctx.store.mkdirs(ctx.layout.manifests_dir)
    except AccessDenied as e:
        raise DestinationError(f"destination {ctx.store.full_url()} is not writable: {e}") from None


@stage("task_stage_setup", "task_setup", level=TASK_LEVEL)
def setup_task(ctx: StageContext, attempt_dir: str) -> None:
    _create_new_directory(ctx, attempt_dir, "task attempt")
