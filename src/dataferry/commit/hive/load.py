"""The load: moving a committed staging tree into the table, as named stages.

plan_load -> (journal saved) -> move_aside -> move_in -> register -> (journal: registered)

A partition new to the table moves with one directory rename where the store renames
directories atomically in O(1); otherwise its files move one by one, in parallel. Replaced
partitions (overwrite) are first moved aside into the staging directory, so a failed load can
put them back. Every move is an idempotent journal step.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import JobCommitError, NotFound
from ...stats import IOStatistics
from ...store import FileStatus, IOPool, Store, paths
from ...store.walk import parallel_walk
from ..job.links import refuse_links
from ..job.move import move
from ..protocol.inflight import published_name
from .catalog import Catalog, PartitionRecord
from .journal import Journal, Step
from .staging import REPLACED_DIR, is_staging_dir


@dataclass
class LoadPools:
    partitions: IOPool
    files: IOPool

    def close(self) -> None:
        self.partitions.close()
        self.files.close()


@dataclass
class LoadStats:
    partitions: int = 0
    dir_renames: int = 0
    file_moves: int = 0
    renamed_in_place: int = 0  # files of a partition moved whole, given their own names
    aside: int = 0
    stage_seconds: dict[str, float] = field(default_factory=dict)


def copy_name(name: str, n: int) -> str:
    """Hive's name for the n-th copy: `base_copy_N.ext`."""
    base, dot, ext = name.rpartition(".")
    return f"{base}_copy_{n}.{ext}" if dot and base else f"{name}_copy_{n}"


def _exists_map(store: Store, candidates: list[str], pool: IOPool) -> dict[str, FileStatus | None]:
    def probe(path: str) -> tuple[str, FileStatus | None]:
        try:
            return path, store.stat(path)
        except NotFound:
            return path, None

    return dict(pool.map(probe, candidates, adaptive=True))


def plan_load(
    store: Store,
    staging: str,
    ext: str,
    mode: str,
    table: str,
    job_id: str,
    pools: LoadPools,
) -> Journal:
    """Decide every move of the load from the staged tree and the table as it is now."""
    staged: dict[str, list[FileStatus]] = defaultdict(list)
    tree = parallel_walk(store, ext, pools.partitions)
    refuse_links(store, tree, "staged tree", error=JobCommitError)  # before any move
    for st in tree:
        rel = paths.relative_to(st.path, ext)
        if not paths.is_hidden(rel):
            staged[paths.parent(rel)].append(st)
    partitions = sorted(staged)
    steps: list[Step] = []
    caps = store.capabilities
    dir_rename_ok = caps.atomic_dir_rename and caps.o1_dir_rename
    aside_root = f"{staging}/{REPLACED_DIR}"

    def move_aside(st: FileStatus) -> None:
        target = f"{aside_root}/{st.path}"
        if st.is_dir and not dir_rename_ok:
            for f in parallel_walk(store, st.path, pools.partitions):
                steps.append(Step("aside", f.path, f"{aside_root}/{f.path}"))
        else:
            steps.append(Step("aside", st.path, target, directory=st.is_dir))

    existing = _exists_map(store, [p for p in partitions if p], pools.partitions)
    # an overwrite that writes into the table's root (an unpartitioned insert) replaces the
    # whole table, as Hive's INSERT OVERWRITE of an unpartitioned table and pyarrow's
    # delete_matching of an unpartitioned write do
    if mode == "overwrite-table" or (mode == "overwrite" and "" in partitions):
        for e in _visible_entries(store, ""):
            move_aside(e)
        existing = dict.fromkeys(existing)
    elif mode == "overwrite":
        for p in partitions:
            if existing.get(p) is not None:
                move_aside(existing[p])  # type: ignore[arg-type]
                existing[p] = None
    taken = _names_taken(store, [p for p in partitions if p == "" or existing.get(p)], pools)
    nested = {p for p in partitions for q in partitions if q != p and paths.is_under(q, p)}
    for p in partitions:
        if p and existing.get(p) is None and dir_rename_ok and p not in nested:
            steps.append(Step("in", paths.join(ext, p), p, directory=True))
            for st in sorted(staged[p], key=lambda s: s.path):  # then the files' own names
                if published_name(st.name) != st.name:
                    own = paths.join(p, published_name(st.name))
                    steps.append(Step("in", paths.join(p, st.name), own))
            continue
        names = taken.get(p, set())
        for st in sorted(staged[p], key=lambda s: s.path):
            own = published_name(st.name)  # staged under its in-flight name
            name, n = own, 0
            while name in names:
                n += 1
                name = copy_name(own, n)
            names.add(name)
            steps.append(Step("in", st.path, paths.join(p, name)))
    return Journal(job_id=job_id, mode=mode, table=table, partitions=partitions, steps=steps)


def _visible_entries(store: Store, path: str) -> list[FileStatus]:
    try:
        entries = store.list(path)
    except NotFound:
        return []
    return [e for e in entries if not paths.is_hidden(e.path) and not is_staging_dir(e.name)]


def _names_taken(store: Store, partitions: list[str], pools: LoadPools) -> dict[str, set[str]]:
    """File names already in partitions that receive files (for `_copy_N` in append)."""

    def names(p: str) -> tuple[str, set[str]]:
        try:
            return p, {e.name for e in store.list(p) if not e.is_dir}
        except NotFound:
            return p, set()

    return dict(pools.partitions.map(names, partitions, adaptive=True))


def in_place(step: Step) -> bool:
    """A step that gives a file of a partition moved whole its own name (in the table)."""
    return not step.directory and paths.parent(step.src) == paths.parent(step.dst)


def run_steps(
    store: Store,
    steps: list[Step],
    pools: LoadPools,
    backwards: bool = False,
    fence: Callable[..., None] | None = None,
    stats: IOStatistics | None = None,
) -> int:
    """Carry out (or undo) moves, directory renames on the partition pool and file moves on the
    file pool. Idempotent: a step already done (or undone) is skipped. Returns moves made.
    `fence(step, strict=False)` is asked before each move (the claim's check). Each move is
    the one resilient move (an unknown outcome resolved, throttling backed off, a cut-short
    copy-rename finished); its counters go to `stats` when given."""
    moved = 0
    lock = threading.Lock()

    def one(step: Step) -> None:
        nonlocal moved
        if fence is not None:
            fence("moving a partition or file", strict=False)
        src, dst = (step.dst, step.src) if backwards else (step.src, step.dst)
        if backwards and in_place(step) and not store.exists(src):
            return  # its partition never moved in: the file is still staged, as it was
        if move(store, src, dst, stats=stats, context="load step").moved:
            with lock:
                moved += 1

    # (a partition moved whole is not made first: its files' renames to their own names
    # follow its move, and are undone before it)
    whole = {end for s in steps if s.directory for end in (s.src, s.dst)}
    parents = sorted({paths.parent(s.src if backwards else s.dst) for s in steps} - whole - {""})
    pools.partitions.for_each(store.mkdirs, parents, adaptive=True)
    directories = [s for s in steps if s.directory]
    files = [s for s in steps if not s.directory]
    if not backwards:
        pools.partitions.for_each(one, directories, adaptive=True)
    pools.files.for_each(one, files, adaptive=True)
    if backwards:
        pools.partitions.for_each(one, directories, adaptive=True)
    return moved


def register(
    store: Store,
    catalog: Catalog,
    journal: Journal,
    table_location: str,
    pools: LoadPools,
) -> list[PartitionRecord]:
    """Record each written partition's state after the load (files and bytes as listed now)."""

    def state(p: str) -> PartitionRecord:
        if p:
            files = [f for f in store.walk(p) if not paths.is_hidden(paths.relative_to(f.path, p))]
        else:
            files = [e for e in _visible_entries(store, "") if not e.is_dir]
        return PartitionRecord(
            spec=p,
            location=store.full_url(p),
            files=len(files),
            bytes=sum(f.size for f in files),
            job_id=journal.job_id,
        )

    records = pools.partitions.map(state, journal.partitions, adaptive=True)
    replace = "table" if journal.mode == "overwrite-table" else "none"
    catalog.record_load(journal.table, table_location, records, journal.job_id, replace)  # type: ignore[arg-type]
    return records
