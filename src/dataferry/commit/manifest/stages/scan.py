"""Task commit, part 1: walk the task attempt directory once, one listing per directory.

Each file becomes a FileEntry (size and etag straight from the listing, no extra request); each
directory becomes a DirEntry with the state its destination had: probed with one stat only when
its parent existed in the destination, otherwise known not to exist without asking.
"""

from __future__ import annotations

from ....errors import NotFound, TaskCommitError
from ....store import paths
from ..files import DirEntry, EntryStatus, FileEntry
from .base import StageContext, stage


@stage("task_stage_scan_directory", "scan_directory")
def scan_task_attempt(
    ctx: StageContext, attempt_dir: str
) -> tuple[list[FileEntry], list[DirEntry]]:
    files: list[FileEntry] = []
    dirs: list[DirEntry] = []
    # (directory under the attempt, its destination, did the destination parent exist?)
    pending = [(attempt_dir, "", True)]
    while pending:
        src_dir, dest_dir, parent_existed = pending.pop()
        try:
            listing = ctx.store.list(src_dir)
        except NotFound:
            raise TaskCommitError(
                f"task attempt directory {ctx.store.full_url(src_dir)} does not exist: the attempt "
                "was never set up, or was aborted"
            ) from None
        for st in listing:
            dest = paths.join(dest_dir, st.name)
            if not st.is_dir:
                files.append(FileEntry(st.path, dest, st.size, st.etag))
                continue
            status = EntryStatus.NOT_FOUND
            if parent_existed:
                try:
                    status = EntryStatus.DIR if ctx.store.stat(dest).is_dir else EntryStatus.FILE
                except NotFound:
                    status = EntryStatus.NOT_FOUND
            dirs.append(DirEntry(dest, status, paths.depth(dest)))
            pending.append((st.path, dest, status == EntryStatus.DIR))
    ctx.stats.incr("committer_task_file_count", len(files))
    ctx.stats.incr("committer_task_directory_count", len(dirs))
    for f in files:
        ctx.stats.add_sample("committer_task_file_size", f.size)
    return sorted(files, key=lambda f: f.dest), sorted(dirs, key=lambda d: (d.level, d.dest))
