"""Job commit, stage 2: create the destination directories the files need.

Only leaf directories are created (their parents come with them); a directory seen existing
(by the job commit's own walk of the destination, or by a Hadoop task that looked) costs no I/O
at all; a file standing where a directory must be is deleted first
(non-recursively: a non-empty directory in its place fails the stage). In parallel where the
store makes the stage wait; in line where it answers faster than threads start (a local disk).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....errors import JobCommitError, NotADirectory, NotFound, StoreError
from ....stages import stage
from ....store import paths
from ...protocol import StageContext
from ..files import DirEntry, EntryStatus


@dataclass
class CreatedDirectories:
    created: set[str] = field(default_factory=set)
    found: int = 0
    files_deleted: int = 0


def leaf_directories(dirs: dict[str, DirEntry]) -> list[DirEntry]:
    """Directories no other listed directory lies below, in level order."""
    leaves: dict[str, DirEntry] = {}
    for d in sorted(dirs.values(), key=lambda d: (d.level, d.dest)):
        parent = paths.parent(d.dest)
        while parent:
            leaves.pop(parent, None)
            parent = paths.parent(parent)
        leaves[d.dest] = d
    return list(leaves.values())


@stage("job_stage_create_target_dirs", "create_directories")
def create_directories(
    ctx: StageContext, dirs: dict[str, DirEntry], force: bool = False
) -> CreatedDirectories:
    """force: create every leaf, even those seen existing (a replaced data set took
    them away). Creating a directory that exists is harmless, so a resumed commit repeats it."""
    result = CreatedDirectories()
    in_the_way = sorted(d.dest for d in dirs.values() if d.status == EntryStatus.FILE)

    def delete_file(path: str) -> None:
        try:
            if ctx.store.stat(path).is_dir:
                return  # made into a directory already (a resumed commit)
            ctx.store.delete(path, recursive=False)
        except NotFound:
            return
        except StoreError as e:
            raise JobCommitError(
                f"cannot delete {ctx.store.full_url(path)}, which stands where a directory "
                f"must be: {e}"
            ) from None

    result.files_deleted = ctx.pool.for_each(delete_file, in_the_way)
    ctx.stats.incr("op_prepare_dir_ancestors", result.files_deleted)
    leaves = leaf_directories(dirs)

    def create(d: DirEntry) -> str | None:
        if not force and d.status in (EntryStatus.DIR, EntryStatus.CREATED_DIR):
            return None  # seen to exist at task commit: no I/O
        with ctx.stats.duration("op_create_one_directory"):
            try:
                ctx.store.mkdirs(d.dest)
            except StoreError:
                _make_way(ctx, d.dest)
        return d.dest

    made = ctx.pool.map(create, leaves, adaptive=True)
    result.created = {m for m in made if m is not None}
    result.found = len(leaves) - len(result.created)
    # every ancestor of a created leaf exists now too
    for leaf in list(result.created):
        parent = paths.parent(leaf)
        while parent:
            result.created.add(parent)
            parent = paths.parent(parent)
    return result


def _make_way(ctx: StageContext, path: str) -> None:
    """mkdirs failed: a file is on the path (appeared since task commit). Delete it, retry."""
    probe = path
    while probe:
        try:
            st = ctx.store.stat(probe)
        except (NotFound, NotADirectory):  # not there, or below the file in the way
            probe = paths.parent(probe)
            continue
        if not st.is_dir:
            ctx.stats.incr("op_delete_file_under_destination")
            ctx.store.delete(probe)
        break
    ctx.store.mkdirs(path)
