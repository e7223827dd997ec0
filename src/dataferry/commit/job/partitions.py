"""The partitions a job writes, and what of a destination a partition overwrite replaces.

pyarrow's `existing_data_behavior="delete_matching"` deletes each leaf directory a write puts a
file into (the first time it gets there) and keeps every other; Spark's dynamic partition
overwrite does the same. dataferry decides it at job commit, under the destination's claim, so
the old contents of a partition go only with a commit that puts the new ones in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...store import Store, paths


def partitions_of(files: Iterable[str], include_root: bool = True) -> list[str]:
    """The directories a job writes files into (`""`: the destination's root)."""
    parts = {paths.parent(f) for f in files}
    if not include_root:
        parts.discard("")
    return sorted(parts)


def in_partitions(store: Store, existing: Sequence[str], partitions: Sequence[str]) -> list[str]:
    """The entries of `existing` (a committer's view of the destination's data: top-level
    entries or files) that lie in one of `partitions`, each as the largest entry wholly
    inside one. An entry above a partition (`day=a` when the job writes `day=a/hour=1`) is
    opened, and its hidden entries are left to their own jobs. The root (an unpartitioned
    write) is all of it, as pyarrow deletes the whole base directory's contents."""
    if "" in partitions:
        return list(existing)
    written = set(partitions)
    found: list[str] = []

    def visit(path: str, is_dir: bool | None) -> None:
        if any(paths.is_under(path, p) and path != p for p in written):
            found.append(path)
        elif is_dir is not False and any(paths.is_under(p, path) for p in written):
            for child in store.list_or_empty(path):
                if not paths.is_hidden(child.name):
                    visit(child.path, child.is_dir)

    for entry in existing:
        visit(entry, None)
    return sorted(found)
