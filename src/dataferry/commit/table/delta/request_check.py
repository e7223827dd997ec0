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

import logging
from collections.abc import Callable
from typing import Any

from ....errors import DataferryError
from ....store import Store, paths
from ...job.vouch import vouched_by
from ...records.intent import load_intent
from .actions import job_adds
from .commit_info import app_id_of
from .group import Request, request_path
from .types import log_schema

log = logging.getLogger("dataferry.commit")


def request_checker(store: Store, committer: Any) -> Callable[[Request], bool]:
    """The check a leader applies to each request it would carry (each request's answer
    kept for the leader's rounds)."""
    answers: dict[str, bool] = {}

    def may_carry(request: Request) -> bool:
        if request.app_id not in answers:
            problem = refusal(store, committer, request)
            if problem:
                log.warning(
                    "Delta table %s: commit request %s not carried: %s; left in place",
                    store.full_url(),
                    store.full_url(request_path(request.app_id)),
                    problem,
                )
            answers[request.app_id] = not problem
        return answers[request.app_id]

    return may_carry


def refusal(store: Store, committer: Any, request: Request) -> str:
    """Why `request` may not be carried ('' : it may)."""
    uuid = request.job_uuid
    if request.app_id != app_id_of(uuid):
        return f"its application id {request.app_id!r} is not its job's ({app_id_of(uuid)!r})"
    if not vouched_by(store, committer.name, uuid):
        return f"neither the destination's claim nor a driver record names job {uuid}"
    try:
        intent = load_intent(store, paths.join(committer.markers_root, uuid), committer.plan_type)
    except DataferryError as e:
        return f"its job's intent record is damaged: {e}"
    if intent is None or intent.job_uuid != uuid or intent.committer != committer.name:
        return f"job {uuid} has no intent record of this committer"
    if intent.mode != "append":
        return f"job {uuid} decided a {intent.mode}, which no group carries"
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
