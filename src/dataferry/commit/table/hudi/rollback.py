"""Rolling a failed Hudi instant back as Hudi does (`hudi.py`'s committer calls these): the
files its markers name (and late ones of the instant beside them) deleted, its pending
timeline files deleted (a `commit` or a `replacecommit`), then a `<r>.rollback` written
(Avro, as Java Hudi writes it; hudi-rs ignores the file)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ....errors import CommitError, NotFound, StoreError
from ....ids import parse_task_attempt_id
from ....store import IOPool, Store, paths
from ...direct.deletion import remove_empty_parents
from .instants import release
from .metadata import table as metadata_table
from .timeline import (
    COMPLETED_ACTIONS,
    JOB_RECORD,
    JOB_UUID_KEY,
    TEMP,
    instant_files,
    parse_base_file_name,
    pending_suffixes,
    rollback_metadata,
    timeline_file,
    write_token,
)

log = logging.getLogger("dataferry.commit")


def job_uuid_of_instant(store: Store, instant: str) -> str | None:
    """The uuid of the dataferry job an instant is (its record, else its timeline files)."""
    for path in (f"{TEMP}/{instant}/{JOB_RECORD}", *instant_files(instant)):
        try:
            data = json.loads(store.read_bytes(path) or b"{}")
        except (NotFound, ValueError):
            continue
        found = data.get("job_uuid") or data.get("extraMetadata", {}).get(JOB_UUID_KEY)
        if found:
            return str(found)
    return None


def roll_back_instant(
    store: Store,
    instant: str,
    deleted: Sequence[str],
    start: float,
    fresh_instant: Callable[[], str],
) -> None:
    """Delete the pending instant's timeline files (of whichever action it is) and record
    the rollback; nothing if neither the timeline nor the table held anything of it."""
    # the metadata table's part first: once `.rollback` names the instant, Hudi's reader
    # would read the instant's blocks there
    indexed = metadata_table.roll_back_instant(store, instant)
    action, found = "commit", []
    for a in COMPLETED_ACTIONS:
        mine = [timeline_file(instant, s) for s in reversed(pending_suffixes(a))]
        mine = [p for p in mine if store.exists(p)]
        if mine:
            action, found = a, [*found, *mine]
    if not found and not deleted and not indexed:
        return  # nothing of the instant on the timeline or in the table
    # the rollback's instant is taken while the instant's own files are still on the
    # timeline (so it sorts after the instant it rolls back, whatever the clock says)
    r = fresh_instant()
    for p in found:
        store.delete(p)
    took = int((time.time() - start) * 1000)
    store.create_if_absent(
        timeline_file(r, "rollback"), rollback_metadata(r, instant, deleted, took, action)
    )
    release(store, r)  # its reservation (`instants.py`): the timeline names it now
    log.warning(
        "Hudi table %s: rolled back %s %s (%d files deleted) as %s.rollback",
        store.full_url(),
        action,
        instant,
        len(deleted),
        r,
    )


def delete_untracked_of_instant(
    store: Store,
    instant: str,
    committed: Sequence[str],
    pool: IOPool,
    also: Sequence[str] = (),
    kept: Callable[[], set[str]] | None = None,
) -> list[str]:
    """Base files of the instant that its commit does not list, in the directories of its
    committed files and of `also`: written by a given-up attempt after the last look at the
    markers. One listing per directory; what `kept()` names (the files completed instants
    reference) is never deleted, whatever a job record says the instant is."""
    keep = set(committed)
    doomed = []
    for d in sorted({paths.parent(f) for f in (*keep, *also)}):
        for st in store.list_or_empty(d):
            parsed = None if st.is_dir else parse_base_file_name(st.name)
            if parsed and parsed[2] == instant and st.path not in keep:
                doomed.append(st.path)
    if doomed and kept is not None:
        referenced = kept()
        doomed = [f for f in doomed if f not in referenced]
    pool.for_each(_delete_quietly(store), doomed, adaptive=True)
    remove_empty_parents(store, doomed)
    return doomed


def _delete_quietly(store: Store):
    def delete(path: str) -> bool:
        try:
            return store.delete(path)
        except StoreError:
            return False

    return delete


def unreported_files(
    store: Store, instant: str, job_attempt: int, stray: Sequence[str], messages: Sequence[Any]
) -> list[str]:
    """The stray files of the instant whose write token is a committed attempt's (left out
    of that attempt's commit): what the job commit refuses to delete."""
    committed = set()
    for m in messages:
        a = parse_task_attempt_id(m.attempt_id)
        committed.add(write_token(a.task.index, job_attempt, a.number))
    found = []
    for f in stray:
        parsed = parse_base_file_name(paths.name(f))
        if parsed and parsed[2] == instant and parsed[1] in committed and store.exists(f):
            found.append(f)
    return found


def refuse_late_write(store: Store, instant: str, attempt: object) -> None:
    """A file of a completed instant is visible to hudi-rs whether its commit lists it or
    not, so an attempt that marks a file once its instant completed (a zombie the driver gave
    up on) writes nothing: checked after its marker is made, so a write that passes the check
    is marked before the job commit's last look at the markers."""
    if any(store.exists(timeline_file(instant, a)) for a in COMPLETED_ACTIONS):
        raise CommitError(
            f"task {attempt}: instant {instant} has completed: this attempt is late (the job "
            "committed without it) and writes nothing"
        )
