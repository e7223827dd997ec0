"""The stages every committer's job commit shares: decide the write mode, save the intent,
replace what `overwrite` replaces, save `_SUCCESS`, clean up; and what a reader sees of a
destination (the entries a write mode counts)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ...errors import DestinationError, JobCommitError, NotFound, StoreError
from ...stages import stage
from ...store import Store, paths
from ..protocol import CommitPlan, CommitterHooks, JobContext, StageContext, TaskCommitMessage
from ..records.intent import Intent, mark_phase, phase_done, save_intent
from ..records.success import SUCCESS_FILE, success_copy_name
from .links import refuse_linked_entries
from .partitions import in_partitions, partitions_of

log = logging.getLogger("dataferry.commit")

REPLACED_PHASE = "replaced"


@stage("job_stage_check_write_mode", "check_write_mode")
def check_write_mode(
    ctx: StageContext,
    committer: CommitterHooks,
    job: JobContext,
    plan: CommitPlan,
    messages: Sequence[TaskCommitMessage] = (),
) -> list[str]:
    """Decide the write mode against the destination as it is now (we hold its claim):
    `error` refuses existing data, `overwrite` returns the entries it replaces, and
    `overwrite-partitions` those in the directories the committed tasks wrote into. A symbolic
    link among the destination's entries is refused here, before the commit is decided: the
    store would refuse to publish through it only after `overwrite` deleted the earlier data."""
    refuse_linked_entries(ctx.store)
    if job.mode == "append" or (committer.replaces_in_transaction and job.mode != "error"):
        return []  # a table's overwrite is part of its transaction: nothing is deleted here
    existing = committer.existing_data(job, plan)
    if job.mode == "overwrite-partitions":
        files = plan.written if plan.written is not None else [f for m in messages for f in m.files]
        written = partitions_of(files)
        ctx.stats.incr("committer_partitions_replaced", len(written))
        return in_partitions(ctx.store, existing, written)
    if job.mode == "error":
        if existing:
            raise DestinationError(
                f"destination {ctx.store.full_url()} is not empty (it holds {len(existing)} "
                f"entries, e.g. {existing[0]!r}); write with mode='append' or mode='overwrite'"
            )
        return []
    return existing


@stage("job_stage_save_intent", "save_intent")
def save_intent_stage(
    ctx: StageContext, job_dir: str, intent: Intent, staged: str | None = None
) -> str:
    """Decide the commit. The claim is checked before and after: a job overtaken just then
    stops, and its intent (if written) is the new holder's to finish. `staged`: this very
    record, written ahead (`stage_intent`), to rename into place."""
    ctx.fence("saving the intent record")
    path = save_intent(ctx.store, job_dir, intent, staged)
    ctx.fence("replacing existing data")
    return path


@stage("job_stage_replace_existing", "replace_existing")
def replace_existing(ctx: StageContext, job_dir: str, intent: Intent) -> int:
    """Delete what the write mode replaces, once: after this phase new files move in, and a
    resumed commit must not delete them."""
    if not intent.replace or phase_done(ctx.store, job_dir, REPLACED_PHASE):
        return 0
    ctx.fence("replacing existing data")

    def replace(path: str) -> None:
        # checked before each delete, as each publish batch is: a holder stopped past its
        # lease while replacing must not go on to delete what its taker has since committed
        ctx.fence("replacing existing data", strict=False)
        ctx.store.delete(path, recursive=True)

    ctx.pool.for_each(replace, intent.replace, adaptive=True)
    mark_phase(ctx.store, job_dir, REPLACED_PHASE)
    ctx.stats.incr("committer_entries_replaced", len(intent.replace))
    return len(intent.replace)


@stage("job_stage_save_success_marker", "save_success")
def save_success(ctx: StageContext, job_dir: str, data: bytes) -> str:
    """Replace `_SUCCESS` in one step: renamed into place where rename is atomic, else one PUT
    (atomic on object stores). Where each call is a server's round trip (`remote_calls`) the
    hidden copy in the job's directory is written while the claim is checked (the check
    guards the rename that readers see, not a file no reader looks at)."""
    caps = ctx.store.capabilities
    step = f"writing {SUCCESS_FILE}"
    if caps.atomic_file_rename:
        tmp = paths.join(job_dir, success_copy_name())
        if caps.remote_calls and ctx.pool.threads > 1:
            try:
                ctx.pool.for_each(
                    lambda call: call(),
                    [lambda: ctx.store.write_bytes(tmp, data), lambda: ctx.fence(step)],
                )
            except BaseException:
                _take_back(ctx.store, tmp)
                raise
        else:
            ctx.fence(step)
            ctx.store.write_bytes(tmp, data)
        ctx.store.delete(SUCCESS_FILE)
        ctx.store.rename(tmp, SUCCESS_FILE)
    else:
        ctx.fence(step)
        ctx.store.write_bytes(SUCCESS_FILE, data)
    return SUCCESS_FILE


def _take_back(store: Store, copy: str) -> None:
    """Delete the hidden copy of `_SUCCESS` this driver just wrote (its name is its own) and
    the hidden directories its write made again: a holder overtaken while it wrote would
    otherwise leave them after its taker had removed the job's directory. Only directories
    left empty go; a failure here is logged, never raised over the error that stopped us."""
    try:
        store.delete(copy)
        parent = paths.parent(copy)
        while parent and paths.is_hidden(parent) and store.delete_if_empty(parent):
            parent = paths.parent(parent)
    except StoreError as e:
        log.warning("could not remove %s after a failed commit: %s", store.full_url(copy), e)


@stage("job_stage_cleanup", "cleanup")
def cleanup_stage(ctx: StageContext, committer: CommitterHooks, job: JobContext) -> str:
    return committer.remove_job_dir(ctx, job)


def visible_entries(committer: CommitterHooks) -> list[str]:
    """The destination's top-level entries a reader sees, and a committed job's `_SUCCESS`."""
    try:
        entries = committer.store.list("")
    except NotFound:
        return []
    except StoreError as e:
        raise DestinationError(
            f"destination {committer.store.full_url()} cannot be listed: {e}"
        ) from None
    return sorted(e.path for e in entries if not paths.is_hidden(e.path) or e.path == SUCCESS_FILE)


def check_messages(job: JobContext, messages: Sequence[TaskCommitMessage]) -> None:
    """Refuse foreign messages and a task committed twice. No messages at all is a job
    whose tasks wrote nothing (Spark's zero-partition job): it commits, publishing
    nothing but `_SUCCESS`, as Hadoop's committers do."""
    seen: dict[str, str] = {}
    for m in messages:
        if m.job_id != str(job.job_id):
            raise JobCommitError(
                f"job {job.job_id}: commit message of task attempt {m.attempt_id} "
                f"belongs to job {m.job_id}"
            )
        if m.task_id in seen:
            raise JobCommitError(
                f"job {job.job_id}: task {m.task_id} was committed twice, by "
                f"{seen[m.task_id]} and {m.attempt_id}"
            )
        seen[m.task_id] = m.attempt_id


def check_destination(store: Store) -> None:
    """The destination must not be a file (raises DestinationError naming it)."""
    try:
        st = store.stat("")
    except NotFound:
        return
    if not st.is_dir:
        raise DestinationError(f"destination {store.full_url()} is a file, not a directory")
