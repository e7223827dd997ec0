"""A Delta commit as dataferry writes it: `_delta_log/<version, 20 digits>.json`, one JSON
action a line (PROTOCOL.md, "Delta Log Entries"), created only if no commit of that version
is there (the Store's `create_if_absent`: a link or O_EXCL on a local disk, a conditional
put on an object store). Whoever creates the file made the version; a writer that finds it
taken lost the race and reads what the winners committed:

    the job's own `txn` among them      its commit landed (an answer lost earlier): done
    a `metaData` or `protocol` action   the table changed under the job: a conflict
    only adds and removes               a blind append is still valid on top of them: it is
                                        written again at the next version (a rebase)

So a version is never overwritten, and a job's transaction is never committed twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ....errors import NotFound
from ....store import Store, paths
from .log import LOG_DIR


class VersionTaken(Exception):
    """Another writer committed the version a job's commit was built on top of (the
    conflict `DeltaFormat.is_conflict` takes; an append is built again and retried)."""


def entry_path(version: int) -> str:
    return paths.join(LOG_DIR, f"{version:020d}.json")


def encode(actions: Sequence[dict[str, Any]]) -> bytes:
    """The commit file's bytes: one compact JSON object a line."""
    return b"".join(
        json.dumps(a, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for a in actions
    )


def read_entry(store: Store, version: int) -> list[dict[str, Any]] | None:
    """A commit's actions (None if the version is not there)."""
    try:
        data = store.read_bytes(entry_path(version))
    except NotFound:
        return None
    return [json.loads(line) for line in data.splitlines() if line.strip()]


@dataclass(frozen=True)
class Landed:
    """Where a job's commit is: its version, and how many times it was rebased."""

    version: int
    rebases: int
    found: bool = False  # an earlier try's, found among the winners
    carried: int = 0  # other jobs' commit requests the version carries (`group`)


def put_commit(
    store: Store,
    version: int,
    actions: Callable[[int], Sequence[dict[str, Any]]],
    app_id: str,
    rebases: int,
) -> Landed:
    """Create the commit file of `version` (`actions(rebases so far)` its actions); if the
    version is taken, look at the winners (the module's table) and try the next free one,
    at most `rebases` times. Raises VersionTaken for a conflict."""
    done = 0
    while True:
        if store.create_if_absent(entry_path(version), encode(actions(done))):
            return Landed(version, done)
        changed: list[str] = []
        while (winner := read_entry(store, version)) is not None:
            for action in winner:
                txn = action.get("txn")
                if isinstance(txn, dict) and txn.get("appId") == app_id:
                    return Landed(version, done, found=True)
            changed += [f"{k} (version {version})" for a in winner for k in a if k in _CHANGES]
            version += 1
        if changed or done >= rebases:
            why = f"it changed the table's {changed[0]}" if changed else "no rebase left"
            raise VersionTaken(f"another writer committed version {version - 1} first ({why})")
        done += 1


# what a winner may change that a commit built before it cannot be moved over
_CHANGES = ("metaData", "protocol")
