"""Whether a group's leader may carry another job's commit request (`group`): only as that
job's own vouched intent record has it.

A request is a file under `_dataferry/`, which anyone who can write into the table's storage
can write; a leader writes its actions into the table's log. Carried on its word, a forged
request could remove committed files from the table, add files no job wrote, or carry
another job's `txn` so that job takes itself for landed while its files never are. So a
leader carries a request only when

    its job is vouched for           the destination's claim or the job's driver record names
                                     the job and this committer (`job/vouch.py`), as recovery
                                     requires before it finishes an intent record
    its job decided an append        the job's intent record is there and readable
    its actions are that decision's  its adds are exactly those the intent record's files
                                     make (`actions.job_adds`: paths, sizes, partition values,
                                     statistics); besides them only `txn` actions: its job's
                                     own, and callers' that name no dataferry job

Anything else is left where it is, not carried and not deleted (it is not the leader's),
with one WARNING naming the file and what is wrong with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....store import Store
from ..requests import decided_append, remembered
from .actions import job_adds
from .commit_info import app_id_of
from .group import Request, request_path
from .types import log_schema


def request_checker(store: Store, committer: Any) -> Callable[[Request], bool]:
    """The check a leader applies to each request it would carry (each request's answer
    kept for the leader's rounds)."""
    return remembered(
        store,
        "Delta table",
        lambda r: request_path(r.app_id),
        lambda r: refusal(store, committer, r),
    )


def refusal(store: Store, committer: Any, request: Request) -> str:
    """Why `request` may not be carried ('' : it may)."""
    uuid = request.job_uuid
    if request.app_id != app_id_of(uuid):
        return f"its application id {request.app_id!r} is not its job's ({app_id_of(uuid)!r})"
    intent, problem = decided_append(store, committer, uuid)
    if intent is None:
        return problem
    plan = intent.payload
    schema = committer.plan_schema(intent)
    want = job_adds(plan.facts, list(plan.partition_by), log_schema(schema) if schema else None)
    adds = [a for a in request.actions if "add" in a]
    if adds != want:
        return f"its {len(adds)} adds are not the {len(want)} files job {uuid} decided to commit"
    others = [a for a in request.actions if "add" not in a]
    for action in others:
        if set(action) != {"txn"}:
            return (
                f"it carries a {next(iter(action), '')!r} action (a request carries adds and txns)"
            )
        app = str(action["txn"].get("appId", ""))
        if app != request.app_id and app.startswith(app_id_of("")):
            return f"it carries another dataferry job's txn ({app!r})"
    if not any(a["txn"].get("appId") == request.app_id for a in others):
        return "it carries no txn of its own job"
    return ""
