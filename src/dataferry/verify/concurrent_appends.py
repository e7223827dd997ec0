"""Racing appenders without the claim: two drivers append into one table at once, each through
the format's optimistic concurrency (`TableFormat.commits_without_claim`), and one of them dies
or loses its answer at its transaction.

What it models: several pipelines appending to one Delta or Iceberg table, each with its own
driver (recorded, as an engine's is), none waiting on the destination's claim. Job A commits;
job B's whole job commit starts on a thread of its own at one of A's store operations: at
points spread over A's job commit, and at A's table transaction itself, where A then

    none                 goes on
    crash_at_intent      dies just before its intent record (nothing decided)
    crash_before_commit  dies just before its transaction (decided)
    crash_after_commit   dies just after its transaction landed
    lost_answer          sees its transaction's answer lost (a timeout after it landed)

and, where the format commits appends by group (`GROUPED`: Delta, Iceberg), the two meet in one group
(`group_races.py`): B's request is published while A leads, and A

    group_none           carries B in its log entry
    group_crash_before   dies just before the group's entry (B's commit carries A)
    group_crash_after    dies just after the group's entry landed
    group_lost_answer    sees the group's entry's answer lost
    group_landed         (not a meeting) lands alone and dies before removing its request,
                         which B, whose base is older, then finds: it must not carry A again

A dead A is recovered by `cleanup` while B may still be committing (a live driver's job is left
alone), and once more after B ended. Expected: B lands exactly once; A lands exactly once if it
reported committed (a lost answer included), and once or not at all if it died, never twice;
each job's files are all visible or none; the earlier data is kept; every file some version of
the table references exists (recovery deleted none of a job that landed); nothing is left over.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import DataferryError, InjectedCrash
from ..store import FaultRule, Op
from ..store import fault_layer as find_fault_layer
from ..store.faults import call_at
from . import invariants as inv
from .earlier import earlier_data
from .group_races import GROUP_FAULTS, Meeting, grouped
from .harness import (
    EXISTING,
    FRESH,
    Scenario,
    ScenarioStores,
    discard,
    leftovers_allowed,
    quiet_store,
    recovery_committer,
    seeded_uuid,
    spread,
    variant_scenario,
)
from .race_parties import JOIN_S, SecondJob, Side, prepare_side

FAULTS = (
    "none",
    "crash_at_intent",
    "crash_before_commit",
    "crash_after_commit",
    "lost_answer",
    *GROUP_FAULTS,
)
INTENT_FILE = "_commit_intent.json"
TRANSACTION = frozenset({Op.TABLE_COMMIT})


def claimless(committer: str, url: str, options: dict[str, Any]) -> bool:
    """Whether the committer's appends go without the claim (a table format that commits
    them through its own optimistic concurrency): the scenarios run only for those."""
    try:
        made = recovery_committer(committer, quiet_store(url), "append", options)
    except DataferryError:  # no append (or not on this store): nothing to race
        return False
    asks = getattr(made, "claimless_jobs", None)
    return callable(asks) and bool(asks())


@dataclass
class _Variant:
    destination: str
    fault: str
    uuids: tuple[str, str, str]  # earlier data, job A, job B
    mode: str = "append"
    start: int = 0
    end: int = 0


def _at(fault: str) -> dict[str, Any]:
    """Where in A's commit the fault (and B's start) is: its transaction, or its intent."""
    if fault == "crash_at_intent":
        return {"kinds": frozenset({Op.WRITE}), "predicate": _intent}
    return {"kinds": TRANSACTION}


def _intent(_index: int, _op: Op, path: str) -> bool:
    return path.endswith(INTENT_FILE)


def _fault_rule(fault: str, start_b: Callable[..., None]) -> FaultRule:
    """A's fault, B started by it first (one rule: an operation fires its first match)."""
    where = {**_at(fault), "callback": start_b}
    if fault in ("crash_at_intent", "crash_before_commit"):
        return FaultRule(action="crash", when="before", **where)
    if fault == "crash_after_commit":
        return FaultRule(action="crash", when="after", **where)
    if fault == "lost_answer":
        return FaultRule(action="ambiguous", when="after", **where)
    return FaultRule(action="callback", **where)


def _run(
    committer: str, url: str, options: dict[str, Any], v: _Variant, index: int | None
) -> Scenario:
    """One race: B started at A's operation `index` (None: at A's transaction, or intent)."""
    from ..commit.job.cleanup import cleanup_destination

    earlier = earlier_data(committer, url, options, v.destination, v.uuids[0])
    a, b = Side("A", v.uuids[1]), Side("B", v.uuids[2])
    second = SecondJob(b)
    start_b = second.start

    meeting = Meeting(v.fault, second, committer) if v.fault in GROUP_FAULTS else None
    if meeting is not None:
        rules_a, rules_b = meeting.rules_a(), meeting.rules_b()
    else:
        rules_a = [call_at(index, start_b) if index is not None else _fault_rule(v.fault, start_b)]
        rules_b = []
    prepare_side(committer, url, "append", options, a, rules_a, 0.0, True)
    prepare_side(committer, url, "append", options, b, rules_b, 0.0, True)
    fault = find_fault_layer(a.store)
    assert fault is not None
    start = fault.op_count
    try:
        a.commit()
    except InjectedCrash as e:
        a.status, a.error = "crashed", str(e)
    fault.armed = False
    if index is None and v.fault == "none":  # the baseline: where A's job commit lies
        v.start, v.end = start, fault.op_count
    start_b()
    recovered = []
    if a.status == "crashed":  # recovered while B may still commit, then once B ended
        recovered.append(cleanup_destination(quiet_store(url), older_than_s=0))
    ended = second.wait()
    if a.status == "crashed":
        recovered.append(cleanup_destination(quiet_store(url), older_than_s=0))
    outcome = f"A {a.status}, B {b.status}"
    if meeting is not None:
        outcome += meeting.verdict(committer, url, options, a, b)
    scenario = variant_scenario(v, "concurrent", index=index, when=v.fault, outcome=outcome)
    if index is not None and index < len(fault.trace):
        scenario.op, scenario.path = fault.trace[index].op.value, fault.trace[index].path
    if not ended:
        scenario.problems.append(f"{inv.LIVE}: job B's commit did not end {JOIN_S:g} s after A's")
    for report in recovered:
        scenario.problems += [
            f"{inv.NO_LEFTOVERS}: cleanup could not recover {p}: {why}"
            for p, why in report.failed.items()
        ]
    allow = leftovers_allowed(committer, url, "append", options)
    scenario.problems += check_appends(committer, url, options, earlier, a, b, allow)
    return scenario


def check_appends(
    committer: str,
    url: str,
    options: dict[str, Any],
    earlier: inv.Snapshot,
    a: Side,
    b: Side,
    allow: tuple[str, ...],
) -> list[str]:
    """The table after both appenders ended (and A's recovery), against the module's promise."""
    store = quiet_store(url)
    table = recovery_committer(committer, store, "append", options)
    problems: list[str] = []
    visible = inv.visible_files(store)
    present = []
    for s in (a, b):
        landed = table.commits_of_job(s.uuid)
        files = inv.files_of_job(store, s.uuid, visible)
        if landed > 1:
            problems.append(
                f"{inv.EXCLUSIVE}: job {s.name}'s transaction is in the table {landed}x"
            )
        if s.status not in ("committed", "crashed"):
            problems.append(f"{inv.WRITE_MODE}: job {s.name} in mode 'append' failed: {s.error}")
        if s.status == "committed" and not landed:
            problems.append(f"{inv.COMPLETE}: job {s.name} reported committed, not in the table")
        if landed and not files:
            problems.append(f"{inv.NO_LOSS}: job {s.name} is in the table, none of its rows read")
        if files and not landed:
            problems.append(f"{inv.NOTHING_OF_FAILED}: job {s.name} visible, not in the table")
        if files:
            present.append(s.uuid)
    problems += inv.check_earlier(store, earlier, visible, set())
    problems += inv.check_jobs(store, present, ignore=earlier)
    missing = sorted(f for f in table.referenced_files() if not store.exists(f))
    if missing:
        problems.append(
            f"{inv.NO_LOSS}: {len(missing)} files the table references are gone, e.g. {missing[0]}"
        )
    problems += inv.check_no_leftovers(store, allow)
    return problems


def run_concurrent_appends(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    points: int = 6,
    progress: Callable[[int], None] | None = None,
    destinations: tuple[str, ...] = (FRESH, EXISTING),
    faults: tuple[str, ...] = FAULTS,
) -> list[Scenario]:
    """On a fresh table and on one holding data: B at `points` operations spread over A's
    commit (none: 0), and at A's transaction with each of `faults`. No scenario for a
    committer whose appends hold the claim (`concurrent.py` races those)."""
    if not claimless(committer, stores.url("c-probe"), options):
        return []
    if not grouped(committer):
        faults = tuple(f for f in faults if f not in GROUP_FAULTS)
    rng = random.Random(f"{seed}:concurrent_appends")
    runs: list[tuple[_Variant, int | None]] = []
    for dest in destinations:
        uuids = (seeded_uuid(rng), seeded_uuid(rng), seeded_uuid(rng))
        base = _Variant(dest, "none", uuids)
        if points > 0:
            url = stores.url(f"ca-{dest[0]}-base")
            _run(committer, url, options, base, None)
            discard(quiet_store(url))
            inner = list(range(base.start + 1, base.end))
            chosen = sorted(spread(inner, max(0, points - 2), rng))
            runs += [(base, i) for i in dict.fromkeys([base.start, *chosen, base.end])]
        # a new table is made by one job alone (its metaData): groups meet on one that exists
        met = [f for f in faults if dest != FRESH or f not in GROUP_FAULTS]
        runs += [(_Variant(dest, f, uuids), None) for f in met]
    out = []
    for n, (v, index) in enumerate(runs):
        url = stores.url(f"ca-{v.destination[0]}-{v.fault}-{n}")
        scenario = _run(committer, url, options, v, index)
        scenario.schedule = (
            f"B's append at op {index - v.start} of A's {v.end - v.start}"
            if index is not None
            else f"B's append at A's {_where(v.fault)}, A: {v.fault}"
        )
        discard(quiet_store(url))
        out.append(scenario)
        if progress:
            progress(len(runs))
    return out


def _where(fault: str) -> str:
    if fault in GROUP_FAULTS:
        return "commit request (one group)"
    return "intent" if fault == "crash_at_intent" else "transaction"
