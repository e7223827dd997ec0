"""Job commit, beside the claim: the files of directories new to the destination gathered
into the job's own directory, so that each such directory is published in one rename.

Where the store renames a directory atomically in one call and its closes are slow (HDFS:
the claim and the intent each wait for a DataNode's report, `job/ahead.py`), a job commit
has nothing to do while those records close: its renames publish, so they wait for the
intent. A rename into the job's own directory publishes nothing. So, while the claim is
taken, each file whose destination directory is not in the destination yet (under a *top*:
the topmost such directory, a new partition) is renamed to the same path below
`<job attempt dir>/gathered/`; once the intent is in place each top reaches the destination
in one rename (`publish_gathered`). The commit sends as many file renames as before, while
its records close rather than after them.

Only the job's own directory changes before the intent: a job that stops before it is rolled
back with that directory as before, and a commit that fails before its intent moves the files
back (`return_gathered`), so a commit tried again finds them where its manifests say. A top
that appeared in the destination meanwhile (a job that committed before this one held the
claim) is merged into file by file (`move`'s merge_dirs), after the same check of files in
the way as every commit's.
"""

from __future__ import annotations

from collections.abc import Collection

from ....stages import stage
from ....store import paths
from ...job.move import PLAIN_ANSWERS, move
from ...protocol import StageContext
from .create_dirs import leaf_directories
from .load import Batch, LoadedManifests, walk_destination


def under(dest: str, tops: Collection[str]) -> bool:
    """Whether the file `dest` lies in one of `tops` (at any depth)."""
    d = paths.parent(dest)
    while d:
        if d in tops:
            return True
        d = paths.parent(d)
    return False


def tops_to_gather(ctx: StageContext, loaded: LoadedManifests) -> list[str]:
    """The job's topmost directories not in the destination now: a guess made before the
    claim is held (the plan under the claim checks the destination again)."""
    if not loaded.files or not loaded.directories:
        return []
    return sorted(walk_destination(ctx, loaded.directories).absent)


@stage("job_stage_gather_files", "gather_files")
def gather_files(ctx: StageContext, loaded: LoadedManifests, tops: Collection[str]) -> int:
    """Rename each file under `tops` to its destination path below the job's gathered
    directory (its directories made first, all in parallel); returns the files moved."""
    root = ctx.layout.gathered_dir
    leaves = [d.dest for d in leaf_directories(loaded.directories) if under(d.dest + "/_", tops)]
    ctx.pool.for_each(lambda d: ctx.store.mkdirs(f"{root}/{d}"), leaves, adaptive=True)
    return _move_all(ctx, loaded, tops, back=False)


def return_gathered(ctx: StageContext, loaded: LoadedManifests, tops: Collection[str]) -> int:
    """Move gathered files back to where their manifests list them (a commit that failed
    before its intent); returns the files moved."""
    return _move_all(ctx, loaded, tops, back=True)


def _move_all(ctx: StageContext, loaded: LoadedManifests, tops: Collection[str], back: bool) -> int:
    root = ctx.layout.gathered_dir
    rename = ctx.store.rename
    moved = 0

    def one_batch(batch: Batch) -> int:
        attempt, entries = batch
        count = 0
        for entry in entries:
            if not under(entry.dest, tops):
                continue
            source, target = entry.source, f"{root}/{entry.dest}"
            if back:
                source, target = target, source
            count += 1
            try:
                rename(source, target)
                continue
            except PLAIN_ANSWERS as e:
                answer = e
            move(
                ctx.store,
                source,
                target,
                size=entry.size,
                etag=entry.etag or None,
                attempts=ctx.config.rename_attempts,
                stats=ctx.stats,
                context=f"task attempt {attempt}",
                answered=answer,
            )
        return count

    for count in ctx.pool.map(one_batch, loaded.kept_batches(ctx.pool.threads), adaptive=True):
        moved += count
    ctx.stats.incr("commit_file_gathered" if not back else "commit_file_gathered_returned", moved)
    return moved


@stage("job_stage_publish_gathered", "publish_gathered")
def publish_gathered(ctx: StageContext, tops: Collection[str]) -> int:
    """Each gathered top to its place in the destination, one rename each (a top there by now
    is merged into; one published before a crash is found there); returns the tops renamed."""
    root = ctx.layout.gathered_dir

    def publish(top: str) -> bool:
        outcome = move(
            ctx.store,
            f"{root}/{top}",
            top,
            attempts=ctx.config.rename_attempts,
            stats=ctx.stats,
            merge_dirs=True,
            context="gathered directory",
        )
        return outcome.how == "renamed"

    ctx.fence("publishing the gathered directories", strict=False)
    renamed = sum(ctx.pool.map(publish, sorted(tops), adaptive=True))
    ctx.stats.incr("commit_dir_gathered_published", len(tops))
    return renamed
