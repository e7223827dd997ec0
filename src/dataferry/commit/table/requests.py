"""Commit requests of group commit, as every table format keeps them: one file per job under
the format's group directory in `_dataferry/`, published when the job's files and intent
record are durable, read by every committing job (a group's leader), removed once the job
landed or can never land (`delta/group.py`, `iceberg/group.py`).

What a leader may carry is the same for every format: a request is a file anyone who can
write into the table's storage can write, so it is carried only as its job's own vouched
intent record has it (`decided_append`, then the format's own comparison of the files).

A job whose request is published and whose try lost to another writer waits for its group's
outcome (`await_withdrawal`): a leader withdraws every request it carried as soon as its commit
landed, so the request's disappearance is the answer's signal. In this process the withdrawal
wakes the waiter at once (a condition); from another process the waiter re-reads only that one
record, after waits that start at a millisecond and double. Either way the waiter then asks
the table (its landed check), never trusting the signal alone: a request also disappears when
its own job withdrew it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from ...errors import DataferryError, NotFound, StoreError
from ...store import Store, paths
from ..job.vouch import vouched_by
from ..records.intent import Intent, load_intent

log = logging.getLogger("dataferry.commit")

R = TypeVar("R")

FIRST_LOOK_S = 0.001  # the first wait before a waiter re-reads its request; each next doubles
LAST_LOOK_S = 0.05  # up to this

_withdrawn = threading.Condition()
_withdrawals = [0]  # withdrawals made in this process (each wakes every waiter to look)


def publish(store: Store, path: str, data: bytes) -> bool:
    """Publish a job's request at `path` (kept as it is if an earlier try of the job
    published it: that one's base is older, which only widens what a leader checks); True
    if this call published it."""
    for left in range(4, -1, -1):
        try:
            return store.create_if_absent(path, data)
        except NotFound:  # the directory emptied and removed under it: again
            if not left:
                raise
    return False


def withdraw(store: Store, directory: str, path: str) -> None:
    """Remove a job's request (and its directory, once empty): its job landed, or it can
    never land."""
    try:
        store.delete(path)
    except NotFound:
        pass
    _wake()
    try:
        store.delete_if_empty(directory)
    except StoreError:
        pass


def _wake() -> None:
    with _withdrawn:
        _withdrawals[0] += 1
        _withdrawn.notify_all()


def await_withdrawal(store: Store, path: str, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for the request at `path` to be withdrawn (see the module): True
    as soon as it is gone, False when it is still there at the end."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    step = FIRST_LOOK_S
    while True:
        with _withdrawn:
            seen = _withdrawals[0]
        if not store.exists(path):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        with _withdrawn:
            _withdrawn.wait_for(lambda seen=seen: _withdrawals[0] != seen, min(step, left))
        step = min(step * 2, LAST_LOOK_S)


def pause_for(store: Store, path: str) -> Callable[[float], bool]:
    """The wait between a job's tries (`transact`) when its request may be at `path`: ended
    by the request's withdrawal (True) while it is published; a plain sleep (False) when it is
    not there as the wait begins (never published, or withdrawn since the job's landed check,
    which the next try's own check finds)."""

    def pause(seconds: float) -> bool:
        if not store.exists(path):
            time.sleep(seconds)
            return False
        return await_withdrawal(store, path, seconds)

    return pause


def pending(store: Store, directory: str, kind: type[R]) -> list[R]:
    """The requests published now (one being written or removed is skipped: leaving a request
    out of a group is always safe)."""
    found = []
    for st in store.list_or_empty(directory):
        if st.is_dir or not st.name.endswith(".json"):
            continue
        try:
            found.append(msgspec.json.decode(store.read_bytes(st.path), type=kind))
        except (NotFound, msgspec.ValidationError, msgspec.DecodeError):
            continue
    return found


def decided_append(store: Store, committer: Any, uuid: str) -> tuple[Intent | None, str]:
    """(the job's intent record, '') when job `uuid` is vouched for (the destination's claim
    or its driver record names it and this committer: `job/vouch.py`) and its intent record
    decides an append; else (None, why not)."""
    if not vouched_by(store, committer.name, uuid):
        return None, f"neither the destination's claim nor a driver record names job {uuid}"
    try:
        intent = load_intent(store, paths.join(committer.markers_root, uuid), committer.plan_type)
    except DataferryError as e:
        return None, f"its job's intent record is damaged: {e}"
    if intent is None or intent.job_uuid != uuid or intent.committer != committer.name:
        return None, f"job {uuid} has no intent record of this committer"
    if intent.mode != "append":
        return None, f"job {uuid} decided a {intent.mode}, which no group carries"
    return intent, ""


def remembered(
    store: Store, label: str, path_of: Callable[[Any], str], refusal: Callable[[Any], str]
) -> Callable[[Any], bool]:
    """A leader's check of each request it would carry (`refusal`: why not, '' : it may),
    each request's answer kept for the leader's rounds; one WARNING per refused request,
    naming its file (`path_of`), which is left in place: it is not the leader's."""
    answers: dict[str, bool] = {}

    def may_carry(request: Any) -> bool:
        key = path_of(request)
        if key not in answers:
            problem = refusal(request)
            if problem:
                log.warning(
                    "%s %s: commit request %s not carried: %s; left in place",
                    label,
                    store.full_url(),
                    store.full_url(key),
                    problem,
                )
            answers[key] = not problem
        return answers[key]

    return may_carry
