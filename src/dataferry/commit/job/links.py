"""Symbolic links in task output and among the destination's entries are refused, never followed.

A link in a task attempt directory (or a staged tree) to a directory elsewhere would otherwise
have its target's files renamed into the destination, emptying the outside directory. Stores
list a link as itself (`FileStatus.is_link`); committers call `refuse_links` on those listings
before anything is renamed.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import CommitError, DestinationError, TaskCommitError
from ...store import FileStatus, Store


def refuse_links(
    store: Store,
    statuses: Iterable[FileStatus],
    where: str,
    *,
    error: type[CommitError] = TaskCommitError,
) -> None:
    """Raise `error` naming the first link among `statuses`, listed from `where` (words such as
    "task attempt directory <url>"); return quietly when there is none. Job-side callers pass
    `error=JobCommitError`."""
    for st in statuses:
        if st.is_link:
            raise error(
                f"{where}: {store.full_url(st.path)} is a symbolic link; links are not "
                "followed, so it cannot be committed"
            )


def refuse_linked_entries(store: Store) -> None:
    """DestinationError naming the first top-level entry of the destination (a partition
    directory, `_SUCCESS`, `_dataferry`, `_temporary`) that is a symbolic link."""
    for st in store.list_or_empty(""):
        if st.is_link:
            raise DestinationError(
                f"destination entry {store.full_url(st.path)} is a symbolic link; links are "
                "not followed, so nothing is committed through it (remove it, or point the "
                "job at the directory it links to)"
            )
