"""Job commit, optional stage: check every committed file is there with its size (and its
etag, on stores that keep etags through a rename). One stat per file: meant for testing."""

from __future__ import annotations

from ....errors import JobCommitError, NotFound
from ....stages import stage
from ...protocol import StageContext
from ..files import FileEntry
from .load import Batch, LoadedManifests


@stage("job_stage_optional_validate_output", "validate_output")
def validate_output(ctx: StageContext, loaded: LoadedManifests) -> int:
    check_etags = ctx.store.capabilities.etags_preserved_by_rename

    def check_batch(batch: Batch) -> None:
        for entry in batch[1]:
            check(entry)

    def check(entry: FileEntry) -> None:
        url = ctx.store.full_url(entry.dest)
        try:
            st = ctx.store.stat(entry.dest)
        except NotFound:
            raise JobCommitError(f"validation: expected a file at {url}, found nothing") from None
        if st.is_dir:
            raise JobCommitError(f"validation: expected a file at {url}, found a directory")
        if st.size != entry.size:
            raise JobCommitError(f"validation: {url} has {st.size} bytes, expected {entry.size}")
        if check_etags and entry.etag and st.etag and st.etag != entry.etag:
            raise JobCommitError(f"validation: {url} has etag {st.etag}, expected {entry.etag}")

    ctx.pool.for_each(check_batch, loaded.batches(ctx.pool.threads), adaptive=True)
    return loaded.files
