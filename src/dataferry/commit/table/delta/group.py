"""Group commit of Delta appends: jobs that commit into one table at the same moment share one
log entry, each job's own `txn` action and adds in it, so N appenders cost about one commit.

A job whose files and intent record are durable publishes a *commit request*,
`_dataferry/delta-group/<app id>.json` (created if absent): its `txn` actions and adds, and the
table version its landed check read (`base`: its txn is in no version up to it). From then on
its files are committed by someone (the job, another job's entry, or cleanup rolling the job
forward), never deleted. Every committing job leads:

    walk the log from its own base      its own txn in a version: landed (a lost answer, or
                                        another leader carried it); a `metaData` or `protocol`
                                        action: the table changed under it (VersionTaken)
    list the requests                   take each whose base is at or after the leader's and
                                        whose txn and no change of the table's shape is in
                                        any version after its base (the walk read them)
    create the next version             put-if-absent; the loser walks on at once (the
                                        winner probably carried it), with a little jitter

Why a request is never committed twice: a leader writes version v only if v-1 is the last
version it walked, so every version between a request's base and v was read and held neither
the request's txn nor a change of shape. Why a request is never committed after its job was
told it cannot land: the job says so only after it walked a change of shape at m > base; no
version up to m can be written any more, and any later leader walks m and leaves it.

Deleting a request whose txn landed is safe (anyone may): a request published again later
carries a base from before the landing, so the walk finds the txn. A job that dies before its
request is published has none: its request follows its intent record and a fence check, and
cleanup fences a dead driver before it reads the intent (`records/drivers.py`), so a rolled-back
job's driver stops before it could publish one.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ....errors import CommitUndone, DataferryError, DestinationError, TableCommitConflict
from ....store import Store, paths
from .. import requests
from .entry import Landed, VersionTaken, encode, entry_path, read_entry

log = logging.getLogger("dataferry.commit")

GROUP_DIR = "_dataferry/delta-group"
JITTER_S = 0.002  # the loser's pause before it walks on, times its round (at most 5)


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """One job's commit request: what its share of a group's log entry is."""

    app_id: str
    job_uuid: str
    base: int  # the table version its landed check read: its txn is in none up to it
    actions: list[dict[str, Any]]  # its txn actions, then its adds
    rows: int = 0
    partitions: int = 0

    @property
    def txn_ids(self) -> set[str]:
        return {a["txn"]["appId"] for a in self.actions if "txn" in a}

    @property
    def adds(self) -> int:
        return sum(1 for a in self.actions if "add" in a)


def request_path(app_id: str) -> str:
    return paths.join(GROUP_DIR, f"{app_id}.json")


def publish(store: Store, request: Request) -> None:
    """Publish the job's request (kept as it is if an earlier try of the job published it:
    that one's base is older, which only widens what the walk checks)."""
    requests.publish(store, request_path(request.app_id), msgspec.json.encode(request))


def withdraw(store: Store, app_id: str) -> None:
    """Remove a job's request: its txn landed, or it can never land (see the module)."""
    requests.withdraw(store, GROUP_DIR, request_path(app_id))


def pause(store: Store, app_id: str) -> Callable[[float], bool]:
    """The wait between the job's tries: ended once a leader carried its request."""
    return requests.pause_for(store, request_path(app_id))


def kept(store: Store, app_id: str, error: DataferryError) -> DataferryError:
    """`error` as the job's commit may end with it. A conflict (the table's shape changed
    since the job's base) proves no leader can carry the job's request: it is withdrawn, and
    the job undone. A job whose request is published (by an earlier try) is otherwise never
    undone (CommitUndone), as another leader may carry its files: a DestinationError instead,
    leaving the job decided for its next try or its recovery."""
    if isinstance(error, TableCommitConflict):
        withdraw(store, app_id)
        return error
    if not isinstance(error, CommitUndone) or not store.exists(request_path(app_id)):
        return error
    return DestinationError(f"{error}; but its commit request is published: not undone")


def pending(store: Store) -> list[Request]:
    """The requests published now (`requests.pending`)."""
    return requests.pending(store, GROUP_DIR, Request)


@dataclass
class _Walk:
    """What a leader read of the log after its base: each version's txn app ids, and the
    versions that changed the table's shape."""

    base: int
    next: int = 0
    txns: dict[int, set[str]] = field(default_factory=dict)
    changes: set[int] = field(default_factory=set)

    def read(self, store: Store) -> None:
        self.next = max(self.next, self.base + 1)
        while (entry := read_entry(store, self.next)) is not None:
            self.txns[self.next] = {a["txn"].get("appId") for a in entry if "txn" in a}
            if any(k in a for a in entry for k in ("metaData", "protocol")):
                self.changes.add(self.next)
            self.next += 1

    def landed(self, app_id: str, since: int) -> int | None:
        return next((v for v in sorted(self.txns) if v > since and app_id in self.txns[v]), None)

    def changed(self, since: int) -> bool:
        return any(v > since for v in self.changes)


# the entry's actions: (rounds lost so far, the requests of others it carries) -> commitInfo,
# the job's own txns and adds, the others' after them
Build = Callable[[int, Sequence[Request]], list[dict[str, Any]]]


def may_group(config: Any) -> bool:
    """Whether a job's options let its append go by request: no change of the table's shape
    (`schema_mode`), no custom metadata for its own `commitInfo` (a group's would not carry
    it)."""
    return config.schema_mode is None and not config.custom_metadata


def grouped(config: Any, mode: str, head: Sequence[Any], removes: Sequence[Any]) -> bool:
    """Whether a job's commit goes by request: a plain append (`may_group`; no new table, no
    change of its shape, no removes)."""
    return mode == "append" and not head and not removes and may_group(config)


def commit(
    store: Store, own: Request, build: Build, rounds: int, may_carry: Callable[[Request], bool]
) -> Landed:
    """Publish the job's request and lead (`lead`). Once the request may be published, no
    error says the job can be undone (only VersionTaken after its withdrawal does): anything
    else is a DestinationError, and the job's intent record stays for its next try or its
    recovery, never rolled back while another leader may carry its files."""
    try:
        publish(store, own)
        return lead(store, own, build, rounds, may_carry)
    except (VersionTaken, DataferryError):
        raise
    except Exception as e:
        raise DestinationError(
            f"Delta table {store.full_url()}: the group commit of {own.app_id} failed: {e}; its "
            "commit request stays published (the job's next try or its recovery lands it)"
        ) from e


def lead(
    store: Store, own: Request, build: Build, rounds: int, may_carry: Callable[[Request], bool]
) -> Landed:
    """Land the job's request, carrying every other request that may go with it (the
    module's walk); `rounds` versions lost to other writers at most. Raises VersionTaken when
    the table's shape changed since the job's base (its request withdrawn first: it can never
    land), GroupPending when every round was lost (the request stays, for the job's next
    try or its recovery)."""
    walk = _Walk(own.base)
    for done in range(rounds + 1):
        walk.read(store)
        version = walk.landed(own.app_id, own.base)
        if version is not None:
            return Landed(version, done, found=True)
        if walk.changed(own.base):
            withdraw(store, own.app_id)
            v = min(walk.changes)
            raise VersionTaken(
                f"another writer committed version {v} first (it changed the table's "
                "metaData or protocol)"
            )
        others = _carried(store, own, walk, may_carry)
        if store.create_if_absent(entry_path(walk.next), encode(build(done, others))):
            for r in (own, *others):
                withdraw(store, r.app_id)
            if others:
                log.debug("Delta group commit of %d jobs at version %d", len(others) + 1, walk.next)
            return Landed(walk.next, done, carried=len(others))
        time.sleep(random.uniform(0, JITTER_S * min(done + 1, 5)))
    raise GroupPending(
        f"lost {rounds + 1} versions in a row to other writers; the job's commit request stays "
        "published and is carried by the next writer's commit or the job's next try"
    )


def _carried(
    store: Store, own: Request, walk: _Walk, may_carry: Callable[[Request], bool]
) -> list[Request]:
    """The other requests the leader's entry may carry (`may_carry`: as their jobs' vouched
    intent records have them, `request_check`); those whose txn landed are removed."""
    taken, out = set(own.txn_ids), []
    for r in pending(store):
        if r.app_id == own.app_id:
            continue
        if r.base < own.base:
            continue  # the walk did not read all of its versions: left to its own job
        if walk.landed(r.app_id, r.base) is not None:
            withdraw(store, r.app_id)  # landed: safe to remove (the module)
            continue
        if walk.changed(r.base) or taken & r.txn_ids:
            continue  # a change of shape since its base; or an app id already in the entry
        if not may_carry(r):
            continue  # not as its job decided (forged, or its job's records gone)
        taken |= r.txn_ids
        out.append(r)
    return out


class GroupPending(VersionTaken):
    """Every round of a group commit was lost to other writers: the request stays published
    (a try of the job again, or its recovery, lands it; another writer may carry it first)."""
