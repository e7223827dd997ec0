"""Deleting what a job's attempts wrote, and only that: the one place the markered committers
(direct, the tables) delete data files. A file goes only when its name carries the job's own tag
(`markers.ownership`) and no committed version references it (`Owner.referenced_anywhere`);
whatever a marker names besides is reported and kept."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from ...errors import StoreError
from ...markers.base import MARKER_EXTN, data_path
from ...markers.direct import is_batch, names_in
from ...markers.files import MARKERS_PREFIX
from ...markers.listing import markers_in
from ...markers.ownership import named_for_job, owned_by_marker_dir
from ...stages import stage
from ...store import IOPool, Store, paths
from ..protocol import JobContext, StageContext

log = logging.getLogger("dataferry.commit")

# the most files of a marker directory `delete_seen_markers` deletes one by one
FEW_MARKERS = 64


class Owner(Protocol):
    """A committer that deletes its jobs' files: its store, its jobs' marker directories, and
    what the destination's committed versions reference."""

    store: Store

    def job_dir(self, job: JobContext) -> str: ...

    def referenced_anywhere(self) -> set[str]: ...


def owned_files(committer: Owner, directory: str, candidates: Sequence[str]) -> list[str]:
    """Of the files the markers in `directory` name, those its job provably wrote (the name
    carries the job's tag: `markers.ownership`) and no committed version references: the only
    files a rollback or a job commit may delete. A marker naming anything else (forged, or
    damaged) is reported and ignored; the committed versions are read only when there is a
    candidate left to delete."""
    mine = [f for f in candidates if owned_by_marker_dir(directory, f)]
    refused = [f for f in candidates if not owned_by_marker_dir(directory, f)]
    if mine:
        referenced = committer.referenced_anywhere()
        refused += [f for f in mine if f in referenced]
        mine = [f for f in mine if f not in referenced]
    if refused:
        log.warning(
            "%s: %d markers in %s name files its job did not write or that a committed version "
            "references (e.g. %s): ignored, nothing of them deleted",
            committer.store.full_url(),
            len(refused),
            directory,
            refused[0],
        )
    return mine


def delete_untracked(
    committer: Owner,
    job_uuid: str,
    committed: Sequence[str],
    pool: IOPool,
    also: Sequence[str] = (),
    committed_dirs: bool = True,
) -> list[str]:
    """Files named for this job (its tag) that its commit does not list, in the directories of
    its committed files (unless `committed_dirs` is False) and of `also`: written by a
    given-up attempt after the last look at the markers. One listing per directory; a file a
    committed version references (another job's whose uuid shares the tag's 8 characters) is
    kept."""
    store = committer.store
    keep = set(committed)
    doomed = [
        st.path
        for d in sorted({paths.parent(f) for f in (*(keep if committed_dirs else ()), *also)})
        for st in store.list_or_empty(d)
        if not st.is_dir and named_for_job(st.name, job_uuid) and st.path not in keep
    ]
    if doomed:
        referenced = committer.referenced_anywhere()
        doomed = [f for f in doomed if f not in referenced]
    pool.for_each(store.delete, doomed, adaptive=True)
    remove_empty_parents(store, doomed)
    return doomed


def delete_uncommitted(
    committer: Owner, directory: str, committed: Sequence[str], pool: IOPool
) -> list[str]:
    """Delete every file the markers in `directory` name that the job did not commit (all of
    them when it committed none) and that is provably its own (`owned_files`), and the
    directories it made that are now empty."""
    store = committer.store
    marked = {data_path(m) for m in markers_in(store, directory)}
    doomed = owned_files(committer, directory, sorted(marked - set(committed)))
    pool.for_each(store.delete, doomed, adaptive=True)
    remove_empty_parents(store, doomed)
    return doomed


def delete_seen_markers(
    committer: Owner, directory: str, job_uuid: str, committed: Sequence[str], pool: IOPool
) -> bool:
    """A committed job's end, on direct markers, from one look at its marker directory: the
    files its markers name that it did not commit (its own: `owned_files`) are deleted, then
    exactly the markers that look saw, then its records, then the directories left empty,
    deepest first (a non-recursive delete each). A marker made since the look is never
    deleted with the others: it stays, with its directory, for `dataferry cleanup`, which
    rolls its file back. So no file of the job's loses its marker unseen, and the partitions
    the job committed into need no listing for such a file (a listing that grows with the
    table); only the directories of the files deleted here are listed, for a file its
    attempt wrote after that delete.

    False, with nothing done, where the look cannot settle it: the directory holds the marker
    service's files, or more than FEW_MARKERS files (one recursive delete then costs fewer
    requests on an object store, and the listing is a small share of such a job)."""
    store = committer.store
    files, dirs = _tree(store, directory, pool)
    top = [f for f in files if paths.parent(f) == directory]
    if len(files) > FEW_MARKERS or any(paths.name(f).startswith(MARKERS_PREFIX) for f in top):
        return False
    markers = [f for f in files if MARKER_EXTN + "." in paths.name(f) or is_batch(paths.name(f))]
    marked = {data_path(n) for n in names_in(store, directory, markers)}  # a batch: seen whole
    doomed = owned_files(committer, directory, sorted(marked - set(committed)))
    pool.for_each(store.delete, doomed, adaptive=True)
    remove_empty_parents(store, doomed)
    pool.for_each(store.delete, markers, adaptive=True)
    pool.for_each(store.delete, sorted(set(files) - set(markers)), adaptive=True)
    for d in reversed(dirs):  # deepest first: a directory a new marker is in stays
        try:
            store.delete(d, recursive=False)
        except StoreError:
            pass
    delete_untracked(committer, job_uuid, committed, pool, also=doomed, committed_dirs=False)
    return True


def _tree(store: Store, directory: str, pool: IOPool) -> tuple[list[str], list[str]]:
    """(every file, every directory) below and including `directory`, one level at a time;
    directories in the order of their levels."""
    files: list[str] = []
    dirs: list[str] = []
    level = [directory]
    while level:
        dirs += level
        below: list[str] = []
        for entries in pool.map(store.list_or_empty, level, adaptive=True):
            for e in entries:
                (below if e.is_dir else files).append(e.path)
        level = below
    return files, dirs


@stage("job_stage_delete_stray_files", "delete_stray_files")
def delete_stray_files(
    ctx: StageContext, committer: Owner, job: JobContext, stray: list[str]
) -> None:
    """Delete the files attempts wrote that the job does not commit; checked again here (the
    plan's list may come from a resumed intent record) to be the job's own."""
    ctx.fence("deleting stray files")
    stray = owned_files(committer, committer.job_dir(job), stray)
    ctx.pool.for_each(ctx.store.delete, stray, adaptive=True)
    remove_empty_parents(ctx.store, stray)


def remove_empty_parents(store: Store, files: Sequence[str]) -> None:
    """Delete the visible directories of `files` that are empty now, deepest first."""
    parents = {paths.parent(f) for f in files}
    for d in sorted(parents, key=paths.depth, reverse=True):
        while d and not paths.is_hidden(d):
            try:
                if store.list(d):
                    break
                store.delete(d, recursive=False)
            except StoreError:
                break
            d = paths.parent(d)
