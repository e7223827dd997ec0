"""Group commit of Iceberg appends: jobs that commit into one table at the same moment share one
snapshot (one catalog commit), its summary naming the leading job (`dataferry.job-uuid`) and
every job it carries (`dataferry.group-job-ids`), so N appenders cost about one commit.

A plain append into an existing table (`may_group`) whose landed check found it in no
snapshot publishes a *commit request*, `_dataferry/iceberg-group/<job uuid>.json` (created if
absent): the table's current snapshot that check read (`base`), its schema and spec ids, and
the job's files. From then on its files are committed by someone (the job, another job's
snapshot, or cleanup rolling the job forward), never deleted. Every committing job leads:

    load the table                   its own job in a snapshot (own or carried): landed
    take each other request          its job in no snapshot of the table (else it landed:
                                     removed); its base on the current snapshot's ancestry
                                     (every snapshot since it was read); the table's schema
                                     and spec its own; vouched, and its files its intent's
                                     (`RequestCheck`)
    one fast append                  the job's files and theirs; the catalog's compare-and-
                                     swap on the branch's snapshot, the schema and the spec

Why a request is never committed twice: the leader's snapshot lands only on the snapshot it
loaded (the catalog asserts the branch's snapshot id), and that table held every snapshot
since the request's base, none naming its job. So pyiceberg's own retries, which rebuild a
failed append on the table as it is then without asking this, are off for a job that may
lead a group (`without_inner_retries`): every try goes through the landed check. Why a
request is never committed after its job was told it cannot land: a job is undone only when
the table's schema or spec is no longer its request's (`kept`: its request withdrawn first),
and a leader's commit asserts the schema and spec it carried the request on. A job rolled
back by recovery (its intent record damaged, which no leader carries) has its request
withdrawn before its files are deleted (`IcebergFormat.forget`). A job that dies before its
request is published has none: its request follows its intent record and a fence check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ....errors import CommitUndone, DataferryError, DestinationError, NotFound
from ....store import Store, paths
from ...protocol import StageContext
from ...records.intent import Intent
from .. import requests
from .catalog import GROUP_KEY, jobs_of

log = logging.getLogger("dataferry.commit")

GROUP_DIR = "_dataferry/iceberg-group"
RETRIES = "commit.retry.num-retries"  # pyiceberg's own retries inside one commit


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """One job's commit request: its share of a group's snapshot."""

    job_uuid: str
    identifier: str
    base: int | None  # the current snapshot its landed check read (None: the table had none)
    schema_id: int
    spec_id: int
    files: list[tuple[str, int]]  # each of its files: (path in the store, size)


def request_path(job_uuid: str) -> str:
    return paths.join(GROUP_DIR, f"{job_uuid}.json")


def publish(store: Store, request: Request) -> Request:
    """Publish the job's request; the one published, if an earlier try of the job (or its
    recovery) published one before (its base is older: it is the one leaders read)."""
    path = request_path(request.job_uuid)
    if requests.publish(store, path, msgspec.json.encode(request)):
        return request
    try:
        return msgspec.json.decode(store.read_bytes(path), type=Request)
    except (NotFound, msgspec.ValidationError, msgspec.DecodeError):
        return request  # removed meanwhile (landed), or damaged: the leaders skip it


def withdraw(store: Store, job_uuid: str) -> None:
    requests.withdraw(store, GROUP_DIR, request_path(job_uuid))


def pending(store: Store) -> list[Request]:
    return requests.pending(store, GROUP_DIR, Request)


def pause(store: Store, job_uuid: str) -> Callable[[float], bool]:
    """The wait between the job's tries: ended once a leader carried its request."""
    return requests.pause_for(store, request_path(job_uuid))


def may_group(config: Any, mode: str) -> bool:
    """Whether a job's commit may go by request: a plain append (no change of the table's
    schema, no summary keys of its own, which a group's snapshot would not carry)."""
    return mode == "append" and config.schema_mode is None and not config.snapshot_properties


def shape(tbl: Any) -> tuple[int, int]:
    """The table's current schema and default spec ids."""
    return tbl.metadata.current_schema_id, tbl.metadata.default_spec_id


def own_request(tbl: Any, job_uuid: str, identifier: str, facts: Sequence[Any]) -> Request:
    """The job's request on the table its landed check read (its job in no snapshot)."""
    current = tbl.current_snapshot()
    schema_id, spec_id = shape(tbl)
    return Request(
        job_uuid=job_uuid,
        identifier=identifier,
        base=current.snapshot_id if current is not None else None,
        schema_id=schema_id,
        spec_id=spec_id,
        files=[(f.path, f.size) for f in facts],
    )


def reaches(tbl: Any, base: int | None) -> bool:
    """Whether the current snapshot's ancestry reaches `base` (None: its root) with no
    snapshot missing on the way: the table holds every snapshot made since `base`."""
    by_id = {s.snapshot_id: s for s in tbl.metadata.snapshots}
    snapshot = tbl.current_snapshot()
    while snapshot is not None:
        if snapshot.snapshot_id == base:
            return True
        if snapshot.parent_snapshot_id is None:
            return base is None
        snapshot = by_id.get(snapshot.parent_snapshot_id)
    return base is None and tbl.current_snapshot() is None


def landed_jobs(tbl: Any) -> set[str]:
    """Every job some snapshot of the table names (its own, or carried)."""
    return {j for s in tbl.metadata.snapshots for j in jobs_of(s.summary)}


class RequestCheck:
    """Whether a leader may carry a request: only as its job's own vouched intent record has
    it (`requests.decided_append`), its files exactly those the intent record commits, on
    this table. A forged request (another's files, a job nothing vouches for) is left in
    place with one WARNING. The intents of the requests passed, for their files' facts."""

    def __init__(self, store: Store, committer: Any, identifier: str) -> None:
        self.store, self.committer, self.identifier = store, committer, identifier
        self.intents: dict[str, Intent] = {}
        self.check = requests.remembered(
            store, "Iceberg table", lambda r: request_path(r.job_uuid), self.refusal
        )

    def __call__(self, request: Request) -> bool:
        return self.check(request)

    def refusal(self, request: Request) -> str:
        """Why `request` may not be carried ('' : it may)."""
        uuid = request.job_uuid
        if request.identifier != self.identifier:
            return f"it names table {request.identifier!r}, not {self.identifier!r}"
        intent, problem = requests.decided_append(self.store, self.committer, uuid)
        if intent is None:
            return problem
        plan = intent.payload
        if plan.table.where.identifier != self.identifier:
            return f"job {uuid} decided to append to table {plan.table.where.identifier!r}"
        want = [(f.path, f.size) for f in plan.facts]
        if [tuple(f) for f in request.files] != want:
            return (
                f"its {len(request.files)} files are not the {len(want)} files job {uuid} "
                "decided to commit"
            )
        self.intents[uuid] = intent
        return ""


def carried(store: Store, tbl: Any, own: str, check: RequestCheck) -> list[Request]:
    """The other requests a leader's snapshot on `tbl` (the table as it just loaded it) may
    carry; those whose job a snapshot already names are removed (they landed)."""
    done, now, out = landed_jobs(tbl), shape(tbl), []
    for r in pending(store):
        if r.job_uuid == own:
            continue
        if r.job_uuid in done:
            withdraw(store, r.job_uuid)  # landed: never carried again
            continue
        if (r.schema_id, r.spec_id) != now or not reaches(tbl, r.base):
            continue  # a change of shape since its base, or snapshots gone: left to its job
        if check(r):
            out.append(r)
    return out


def carry(
    format: Any, ctx: StageContext, tx: Any, tbl: Any, identifier: str, own: Request | None
) -> tuple[list[Request], list[Any]]:
    """The other requests the commit of a job whose own is published (`own`) carries on
    `tbl`, and their DataFiles; the commit then asserts the shape they were built on, and
    goes without pyiceberg's own retries (a job that may be carried never retries inside)."""
    if own is None:
        return [], []
    without_inner_retries(tx)
    check = RequestCheck(format.store, format.committer, identifier)
    others = carried(format.store, tbl, own.job_uuid, check)
    taken, theirs = data_files_of(ctx, format, tx.table_metadata, check, others)
    if taken:
        require_shape(tx, tbl)
    return taken, theirs


def data_files_of(
    ctx: StageContext, format: Any, metadata: Any, check: RequestCheck, others: Sequence[Request]
) -> tuple[list[Request], list[Any]]:
    """(the requests whose files could be built, their DataFiles) on the leader's
    `metadata`, each file's statistics read from its own footer, not from the request."""
    from .files import build_data_files, read_footers

    taken: list[Request] = []
    built: list[Any] = []
    for r in others:
        names = [f.path for f in check.intents[r.job_uuid].payload.facts]
        try:
            footers = read_footers(ctx, names, {})
            built += build_data_files(metadata, names, footers, format.file_uri)
        except Exception as e:  # left to its own job (or its recovery), which says why
            log.info("commit request of job %s not carried: %s", r.job_uuid, e)
            continue
        taken.append(r)
    return taken, built


def group_properties(props: dict[str, str], others: Sequence[Request]) -> dict[str, str]:
    """The summary keys of a snapshot carrying `others` too."""
    if not others:
        return props
    return {**props, GROUP_KEY: ",".join(r.job_uuid for r in others)}


def require_shape(tx: Any, tbl: Any) -> None:
    """The leader's commit lands only on the schema and spec its carried requests had."""
    from pyiceberg.table.update import AssertCurrentSchemaId, AssertDefaultSpecId

    schema_id, spec_id = shape(tbl)
    tx._stage(
        (),
        (
            AssertCurrentSchemaId(current_schema_id=schema_id),
            AssertDefaultSpecId(default_spec_id=spec_id),
        ),
    )


def without_inner_retries(tx: Any) -> None:
    """No retry inside pyiceberg's commit: it would rebuild the append on the table as it is
    then, never asking whether a job it carries (or the job itself) landed meanwhile in
    another leader's snapshot. The job's own retries (`transact`) ask first."""
    table = tx._table
    props = {**table.metadata.properties, RETRIES: "0"}
    table.metadata = table.metadata.model_copy(update={"properties": props})


def kept(store: Store, tbl: Any, own: Request | None, error: DataferryError) -> DataferryError:
    """`error` as a job whose request may be published may end with it. Undone (CommitUndone:
    its files removed) only if no leader can carry its request: the table's schema or spec is
    no longer its request's (withdrawn first), or there is none; otherwise a
    DestinationError, leaving the job decided for its next try or its recovery."""
    if own is None or not isinstance(error, CommitUndone):
        return error
    if not store.exists(request_path(own.job_uuid)):
        return error
    if tbl is None or shape(tbl) != (own.schema_id, own.spec_id):
        withdraw(store, own.job_uuid)
        return error
    return DestinationError(f"{error}; but its commit request is published: not undone")
