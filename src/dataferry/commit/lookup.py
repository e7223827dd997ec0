"""A committer from its name or from a context: how a worker rebuilds its job's committer,
and how recovery rebuilds a dead job's from the records it left."""

from __future__ import annotations

from ..errors import ValidationError
from ..ids import parse_job_id
from ..store import Store
from .protocol import CommitterHooks, JobContext, TaskAttemptContext
from .registry import KNOWN


def committer_for(ctx: JobContext | TaskAttemptContext) -> CommitterHooks:
    """Rebuild the committer a context belongs to (on a worker, from the context alone)."""
    job = ctx if isinstance(ctx, JobContext) else ctx.job
    committer = KNOWN[job.committer].committer_class()(job.store, job.config)
    committer.write_mode = job.mode
    return committer


def committer_by_name(name: str, store: Store) -> CommitterHooks:
    """A committer with its default options (recovery works from the store, not the options);
    a name no committer has (a damaged record's) raises ValidationError naming it."""
    spec = KNOWN.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValidationError(
            f"names committer {name!r:.60}, which dataferry does not have "
            f"(known: {', '.join(sorted(KNOWN))})",
            store.full_url(),
            "committer",
        )
    return spec.committer_class()(store, spec.config_class()(**spec.defaults))


def job_from_ids(committer: CommitterHooks, job_id: str, job_uuid: str, attempt: int) -> JobContext:
    return committer.new_job(parse_job_id(job_id, job_uuid), attempt=attempt)
