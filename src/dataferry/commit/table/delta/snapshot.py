"""A Delta table as a job reads it before an append, kept per process: deltalake's table loaded
once (its protocol, `metaData` and the `txn` of every version up to it), and the commits made
since read by dataferry from the log, one small file each, each once.

deltalake loads a table by replaying its whole log (about 15 ms of CPU at 50 versions, growing
with the log), and brings a loaded one up to date at about half that; an append needs only the
table's shape (protocol, schema, partition columns, properties) and whether its own `txn` is
in some version. So the table deltalake loaded (its *base*) is kept for the process, per table
location, and a job's view of the table at the latest version the log's listing shows is that
base plus the commits after it, as dataferry reads them:

    a commit after the base holds      the view
    only add, remove, txn, commitInfo  the base's shape; the commit's txn app ids
    anything else (a `metaData`, a     none: deltalake loads the table again (a new base), so
    `protocol`, a domain's metadata)   a change another writer made is never hidden

The landed check on a view reads every version: after the base from the commit files
themselves; up to it from the txn ids of its newest checkpoint and the commit files after that,
read once when the base serves a second job (for the first, or where they cannot be read,
deltalake's `transaction_version`: a process that writes once reads no more). A view is never trusted
beyond what the listing shows: the table is loaded again when the base's own commit file is not
the one the base was loaded on (same size, time and etag: a table removed and made again), the
listing's latest version is older than the base, a checkpoint newer than the base is there
(expired commit files may be gone), more than `MAX_TAIL` commits follow it, or a commit file
after it cannot be read. A view has no add actions: an overwrite, which removes the live files,
reads deltalake's table afresh (`DeltaFormat.table`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ....store import Store
from ....store.types import FileStatus
from .commit_info import version_of
from .entry import entry_path

SEARCHED = 50  # commit files up to a base searched for the version of a txn deltalake found
MAX_TAIL = 64  # commits after a base read by dataferry before deltalake loads a new base
MAX_TABLES = 16  # bases kept per process (the least recently loaded one goes first)

_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint")
_CLASSIC = re.compile(r"^\d{20}\.checkpoint\.parquet$")
_PART = re.compile(r"^\d{20}\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
# the actions a commit after the base may hold and leave the base's shape as the table's
_PLAIN = frozenset({"add", "remove", "txn", "commitInfo"})

Stamp = tuple[int, Any, Any]  # a commit file as a listing saw it: size, mtime, etag


@dataclass
class _Base:
    """deltalake's table at `version`, and the commits after it read so far."""

    handle: Any
    version: int
    stamp: Stamp
    after: dict[int, tuple[Stamp, frozenset[str]]] = field(default_factory=dict)
    txns: frozenset[str] | None = None  # every txn app id up to `version` (None: ask deltalake)
    indexed: bool = False  # `txns` was read (once the base serves a second view)


_BASES: dict[tuple[str, tuple[tuple[str, str], ...]], _Base] = {}
_LOCK = threading.Lock()


class TableView:
    """The table at `version`: deltalake's `base` table and, after it, commits of adds, removes
    and txns only (their app ids per version). What an append reads of deltalake's table:
    `version`, `metadata`, `schema`, `protocol`, and `landed_at` for its own txn."""

    def __init__(
        self,
        store: Store,
        base: Any,
        version: int,
        txns: Mapping[int, frozenset[str]],
        at_base: frozenset[str] | None = None,
    ) -> None:
        self.store, self.base, self._version, self.txns = store, base, version, dict(txns)
        self.at_base = at_base  # the txn app ids up to the base (None: deltalake is asked)

    def version(self) -> int:
        return self._version

    def metadata(self) -> Any:
        return self.base.metadata()

    def schema(self) -> Any:
        return self.base.schema()

    def protocol(self) -> Any:
        return self.base.protocol()

    def landed_at(self, app_id: str) -> int | None:
        """The version holding a txn of `app_id` (None: no version up to this one does)."""
        after = [v for v, ids in self.txns.items() if app_id in ids]
        if after:
            return min(after)
        if self.at_base is not None and app_id not in self.at_base:
            return None
        if self.at_base is None and self.base.transaction_version(app_id) is None:
            return None
        # deltalake's history of a table loaded at an older version numbers its entries
        # wrongly: the version is found in the commit files up to the base
        base = self.base.version()
        for version in range(base, max(base - SEARCHED, -1), -1):
            actions = _actions(self.store, version) or []
            if any(
                isinstance(a, dict) and (a.get("txn") or {}).get("appId") == app_id for a in actions
            ):
                return version
        return base


def landed_version(dt: Any, app_id: str) -> int | None:
    """The version of `dt` (a view or deltalake's table) holding a txn of `app_id`, or None."""
    if isinstance(dt, TableView):
        return dt.landed_at(app_id)
    if dt.transaction_version(app_id) is None:
        return None
    return version_of(dt, app_id)


def table_view(
    store: Store,
    location: tuple[str, dict[str, str]],
    latest: int | None,
    commits: Mapping[int, FileStatus],
    checkpoints: Sequence[FileStatus],
    load: Callable[[int | None], Any],
) -> Any:
    """The table at `latest`, the newest of the log's listed `commits` (by version; beside
    the listed `checkpoints`, the module): a view on the process's base, or on a base
    `load(version)` loads now."""
    if latest is None:  # checkpoints only: nothing to keep a base by
        return load(None)
    uri, options = location
    key = (uri, tuple(sorted(options.items())))
    with _LOCK:
        base = _BASES.get(key)
    view = _on(store, base, latest, commits, checkpoints) if base is not None else None
    if view is not None:
        return view
    handle = load(latest)
    with _LOCK:
        _BASES.pop(key, None)
        while len(_BASES) >= MAX_TABLES:  # a process writing many tables keeps a few
            del _BASES[next(iter(_BASES))]
        _BASES[key] = _Base(handle, latest, _stamp(commits[latest]))
    return TableView(store, handle, latest, {})


def forget() -> None:
    """Drop every kept base (tests; a process that wants deltalake's fresh load)."""
    with _LOCK:
        _BASES.clear()


def _on(
    store: Store,
    base: _Base,
    latest: int,
    commits: Mapping[int, FileStatus],
    checkpoints: Sequence[FileStatus],
) -> TableView | None:
    """The view at `latest` on `base`, or None where the module says the table is loaded again."""
    if latest < base.version or latest - base.version > MAX_TAIL:
        return None
    own = commits.get(base.version)
    if own is None or _stamp(own) != base.stamp:
        return None
    for e in checkpoints:
        m = _CHECKPOINT.match(e.name)
        if m and int(m.group(1)) > base.version:
            return None
    if not base.indexed:  # a second view: the base's txn ids, read once, serve the next ones
        base.txns, base.indexed = base_txns(store, base.version, commits, checkpoints), True
    txns: dict[int, frozenset[str]] = {}
    for version in range(base.version + 1, latest + 1):
        st = commits.get(version)
        if st is None:
            return None
        known = base.after.get(version)
        if known is None or known[0] != _stamp(st):
            ids = _plain_txns(store, version)
            if ids is None:
                return None
            known = base.after[version] = (_stamp(st), ids)
        txns[version] = known[1]
    return TableView(store, base.handle, latest, txns, base.txns)


def base_txns(
    store: Store,
    version: int,
    commits: Mapping[int, FileStatus],
    checkpoints: Sequence[FileStatus],
) -> frozenset[str] | None:
    """Every txn app id in the table up to `version`: the newest checkpoint's (a classic or
    multi-part Parquet one), then each commit file's after it (None where one cannot be read,
    or the checkpoint is of another kind: deltalake's `transaction_version` answers then)."""
    parts: dict[int, list[FileStatus]] = {}
    for e in checkpoints:
        m = _CHECKPOINT.match(e.name)
        if m and int(m.group(1)) <= version:
            parts.setdefault(int(m.group(1)), []).append(e)
    ids: set[str] = set()
    start = 0
    if parts:
        start = max(parts)
        found = _checkpoint_txns(store, parts[start])
        if found is None:
            return None
        ids |= found
        start += 1
    for v in range(start, version + 1):
        if v not in commits or (actions := _actions(store, v)) is None:
            return None
        for a in actions:
            txn = a.get("txn") if isinstance(a, dict) else None
            if txn is not None:
                if not isinstance(txn, dict) or not isinstance(txn.get("appId"), str):
                    return None
                ids.add(txn["appId"])
    return frozenset(ids)


def _checkpoint_txns(store: Store, files: Sequence[FileStatus]) -> set[str] | None:
    """The txn app ids of one checkpoint: every part of a classic or multi-part Parquet one
    (None for a V2 checkpoint, a missing part or a file pyarrow cannot read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = sorted(f.name for f in files)
    single = len(names) == 1 and _CLASSIC.match(names[0])
    multi = [m for n in names if (m := _PART.match(n))]
    whole = set(range(1, len(names) + 1))
    if not single and not (
        len(multi) == len(names)
        and {int(m.group(2)) for m in multi} == {len(names)}
        and {int(m.group(1)) for m in multi} == whole
    ):
        return None
    ids: set[str] = set()
    try:
        for f in files:
            rows = pq.read_table(pa.BufferReader(store.read_bytes(f.path)), columns=["txn"])
            for txn in rows.column("txn").to_pylist():
                if txn is not None:
                    ids.add(txn["appId"])
    except Exception:
        return None
    return ids


def _plain_txns(store: Store, version: int) -> frozenset[str] | None:
    """The txn app ids of a commit holding only plain actions (None: it holds another action,
    or cannot be read: deltalake then reads the table, and names what is wrong)."""
    actions = _actions(store, version)
    if actions is None:
        return None
    ids = set()
    for action in actions:
        if not isinstance(action, dict) or not set(action) <= _PLAIN:
            return None
        txn = action.get("txn")
        if txn is not None:
            if not isinstance(txn, dict) or not isinstance(txn.get("appId"), str):
                return None
            ids.add(txn["appId"])
    return frozenset(ids)


def _actions(store: Store, version: int) -> list[Any] | None:
    """A commit file's actions (None if it cannot be read)."""
    try:
        data = store.read_bytes(entry_path(version))
        return [json.loads(line) for line in data.splitlines() if line.strip()]
    except Exception:
        return None


def _stamp(st: FileStatus) -> Stamp:
    return (st.size, st.mtime, st.etag)
