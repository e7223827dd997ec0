"""Task commit, part 1: walk the task attempt directory, one listing per directory.

Each file becomes a FileEntry (size and etag straight from the listing, no extra request); each
directory becomes a DirEntry with the state its destination had: probed with one stat only when
its parent existed in the destination, otherwise known not to exist without asking.

The walk goes level by level, and the listings (then the probes) of one level run on the task's
scan pool. Hadoop walks on one thread; on an object store with tens of milliseconds a request,
a task that wrote into a hundred partitions would wait seconds for that.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....errors import NotFound, TaskCommitError
from ....stages import TASK_LEVEL, stage
from ....store import FileStatus, paths
from ...job.links import refuse_links
from ...protocol import StageContext
from ...protocol.inflight import published_name
from ..files import DirEntry, EntryStatus, FileEntry


@dataclass(frozen=True)
class _Pending:
    """A directory under the attempt still to list, and what is known of its destination."""

    src: str
    dest: str
    dest_exists: bool


@stage("task_stage_scan_directory", "scan_directory", level=TASK_LEVEL)
def scan_task_attempt(
    ctx: StageContext, attempt_dir: str, publish_names: bool = True
) -> tuple[list[FileEntry], list[DirEntry]]:
    """The attempt's files and directories as the job commit will move them; each file goes
    to its own name (`publish_names`) or keeps its in-flight one for a committer above."""
    name_of = published_name if publish_names else (lambda dest: dest)
    files: list[FileEntry] = []
    dirs: list[DirEntry] = []
    level = [_Pending(attempt_dir, "", True)]
    while level:
        listings = ctx.pool.map(lambda p: _list(ctx, p.src), level, adaptive=True)
        # (the subdirectory under the attempt, its destination, did the parent's exist?)
        subdirs: list[tuple[str, str, bool]] = []
        for parent, listing in zip(level, listings, strict=True):
            for st in listing:
                dest = paths.join(parent.dest, st.name)
                if st.is_dir:
                    subdirs.append((st.path, dest, parent.dest_exists))
                else:
                    # published under its own name, not the one it was written under
                    files.append(FileEntry(st.path, name_of(dest), st.size, st.etag))
        statuses = ctx.pool.map(lambda sub: _probe(ctx, sub[1], sub[2]), subdirs, adaptive=True)
        level = []
        for (src, dest, _), status in zip(subdirs, statuses, strict=True):
            dirs.append(DirEntry(dest, status, paths.depth(dest)))
            level.append(_Pending(src, dest, status == EntryStatus.DIR))
    ctx.stats.incr("committer_task_file_count", len(files))
    ctx.stats.incr("committer_task_directory_count", len(dirs))
    for f in files:
        ctx.stats.add_sample("committer_task_file_size", f.size)
    return sorted(files, key=lambda f: f.dest), sorted(dirs, key=lambda d: (d.level, d.dest))


def _list(ctx: StageContext, src: str) -> list[FileStatus]:
    """One directory of the attempt; a link in it fails the task commit before any rename."""
    try:
        listing = ctx.store.list(src)
    except NotFound:
        raise TaskCommitError(
            f"task attempt directory {ctx.store.full_url(src)} does not exist: the attempt "
            "was never set up, or was aborted"
        ) from None
    refuse_links(ctx.store, listing, "task attempt directory")
    return listing


def _probe(ctx: StageContext, dest: str, parent_exists: bool) -> EntryStatus:
    """What the destination holds where a directory goes; no request when its parent did not
    exist there."""
    if not parent_exists:
        return EntryStatus.NOT_FOUND
    try:
        return EntryStatus.DIR if ctx.store.stat(dest).is_dir else EntryStatus.FILE
    except NotFound:
        return EntryStatus.NOT_FOUND
