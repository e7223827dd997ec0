"""Task commit, part 1: walk the task attempt directory, one listing per directory.

Each file becomes a FileEntry (size and etag straight from the listing, no extra request). A
file named flat (`protocol/inflight.py`: the whole relative path in one name, as this
committer's attempts write) goes back to its place in the tree; a file in a subdirectory (a
Hadoop task's, or one too long to name flat) keeps the place it was written in. Every
directory the files need (with its ancestors) becomes a DirEntry of status unknown: the task
asks nothing of the destination. Hadoop's task probes each directory whose parent exists there
(a stat per partition per task: 40 tasks into 40 partitions ask 1,600 times what one walk
answers); here the job commit walks the destination once, under its claim, when it looks for
files in the way (`load.check_existing_files`), and creates every leaf not seen existing (an
unknown status reads so in Hadoop's job commit too).

The walk goes level by level, and the listings of one level run on the task's scan pool.
Hadoop walks on one thread; on an object store with tens of milliseconds a request, a task
that wrote into a hundred partitions would wait seconds for that. An attempt that named its
files flat is one listing, whatever the partitions.
"""

from __future__ import annotations

from ....errors import NotFound, TaskCommitError
from ....stages import TASK_LEVEL, stage
from ....store import FileStatus, paths
from ...job.links import refuse_links
from ...protocol import StageContext
from ...protocol.inflight import published_name, unflatten
from ..files import DirEntry, EntryStatus, FileEntry


@stage("task_stage_scan_directory", "scan_directory", level=TASK_LEVEL)
def scan_task_attempt(
    ctx: StageContext, attempt_dir: str, publish_names: bool = True
) -> tuple[list[FileEntry], list[DirEntry]]:
    """The attempt's files and directories as the job commit will move them; each file goes
    to its own name (`publish_names`) or keeps its in-flight one for a committer above."""
    name_of = published_name if publish_names else unflatten
    files: list[FileEntry] = []
    needed: set[str] = set()  # destination directories, "" being the destination itself
    level = [(attempt_dir, "")]
    while level:
        listings = ctx.pool.map(lambda p: _list(ctx, p[0]), level, adaptive=True)
        below = []
        for (_, parent), listing in zip(level, listings, strict=True):
            for st in listing:  # canonical paths (a listing's): split as strings, not parsed
                name = st.path.rpartition("/")[2]
                dest = f"{parent}/{name}" if parent else name
                if st.is_dir:
                    below.append((st.path, dest))
                    needed.add(dest)
                else:
                    # published under its own name, not the one it was written under
                    entry = FileEntry(st.path, name_of(dest), st.size, st.etag)
                    files.append(entry)
                    needed.add(entry.dest.rpartition("/")[0])
        level = below
    dirs = _directories(needed)
    ctx.stats.incr("committer_task_file_count", len(files))
    ctx.stats.incr("committer_task_directory_count", len(dirs))
    if files:  # the sizes' mean, least and most, added at once rather than file by file
        sizes = [f.size for f in files]
        stat = "committer_task_file_size"
        ctx.stats.merge(
            {
                "meanstatistics": {f"{stat}.mean": {"samples": len(sizes), "sum": sum(sizes)}},
                "minimums": {f"{stat}.min": min(sizes)},
                "maximums": {f"{stat}.max": max(sizes)},
            }
        )
    return sorted(files, key=lambda f: f.dest), dirs


def _directories(needed: set[str]) -> list[DirEntry]:
    """Every directory the files need and each of its ancestors, in level order, of status
    unknown (the destination is not asked)."""
    every = set()
    for d in needed:
        while d and d not in every:
            every.add(d)
            d = paths.parent(d)
    ordered = sorted(every, key=lambda d: (paths.depth(d), d))
    return [DirEntry(d, EntryStatus.UNKNOWN, paths.depth(d)) for d in ordered]


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
