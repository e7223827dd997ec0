"""Racing jobs: two jobs (two drivers, two job ids) commit into one destination at once.

What it models: two pipelines, or a pipeline and its retry launched by a scheduler that thought
the first was dead, write the same table; or a user starts the same write twice. Each job was
set up, and all its tasks committed, before either job commit starts, so every check a job makes
before its commit (is the destination empty? what does `overwrite` replace?) sees the same
destination. Then job A commits, and at one of its store operations job B's whole job commit
starts on a thread of its own (its own committer and store object: it is another driver). A
waits a moment for B (B may finish, give way, or wait for A) and goes on; B is joined after.
The points are spread over A's job commit, from its first operation to after its last (B
strictly after A).

Expected, per write mode: `error`: exactly one job commits and the other fails with a
DestinationError, none of its files visible; `overwrite`: the destination ends with exactly one
job's output, never the union; `append`: both jobs' files, each exactly its own. On a
destination already holding data: `error` refuses both and keeps the data; `overwrite` ends
with one job's output and nothing of the earlier data; `append` keeps the earlier data and adds
both.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..store import fault_layer as find_fault_layer
from ..store.faults import call_at
from . import invariants as inv
from .earlier import earlier_data
from .harness import (
    EXISTING,
    FRESH,
    MODES,
    Scenario,
    ScenarioStores,
    discard,
    leftovers_allowed,
    quiet_store,
    seeded_uuid,
    spread,
    variant_scenario,
)
from .race_parties import JOIN_S, SecondJob, Side, prepare_side


@dataclass
class _Variant:
    destination: str
    mode: str
    uuids: tuple[str, str, str]  # earlier data, job A, job B
    start: int = 0
    end: int = 0


def _run(
    committer: str, url: str, options: dict[str, Any], v: _Variant, index: int | None
) -> Scenario:
    earlier = earlier_data(committer, url, options, v.destination, v.uuids[0])
    a, b = Side("A", v.uuids[1]), Side("B", v.uuids[2])
    second = SecondJob(b)
    start_b = second.start

    rules = [] if index is None else [call_at(index, start_b)]
    prepare_side(committer, url, v.mode, options, a, rules)
    prepare_side(committer, url, v.mode, options, b, [])
    fault = find_fault_layer(a.store)
    assert fault is not None
    start = fault.op_count
    a.commit()
    fault.armed = False
    if index is None:  # the baseline: A alone; where its job commit lies
        v.start, v.end = start, fault.op_count
    ended = second.wait()  # B after A, when A's commit ended before the chosen operation
    scenario = variant_scenario(
        v,
        "concurrent",
        index=index,
        when="before",
        outcome=f"A {a.status}, B {b.status}",
    )
    if index is not None and index < len(fault.trace):
        scenario.op, scenario.path = fault.trace[index].op.value, fault.trace[index].path
    plain = quiet_store(url)
    allow = leftovers_allowed(committer, url, v.mode, options)
    if not ended:
        scenario.problems.append(
            f"{inv.ONE_WRITER}: job B's commit did not end {JOIN_S:g} s after A's (deadlock?)"
        )
    scenario.problems += check_race(plain, v.mode, earlier, a, b, allow)
    return scenario


def check_race(
    store: Any,
    mode: str,
    earlier: inv.Snapshot,
    a: Side,
    b: Side,
    allow: tuple[str, ...],
) -> list[str]:
    """The destination after both jobs ended, against what their write mode promises."""
    problems: list[str] = []
    sides = (a, b)
    visible = inv.visible_files(store)
    files = {s.name: inv.files_of_job(store, s.uuid, visible) for s in sides}
    won = [s for s in sides if s.status == "committed"]
    lost = [s for s in sides if s.status != "committed"]
    has_success = inv.has_success(store)

    def nothing_of(s: Side, name: str) -> None:
        if files[s.name]:
            problems.append(
                f"{name}: {len(files[s.name])} files of job {s.name} ({s.status}) visible, "
                f"e.g. {files[s.name][0]}"
            )

    if mode == "error" and earlier:
        for s in won:
            problems.append(f"{inv.WRITE_MODE}: job {s.name} in mode 'error' committed over data")
        for s in lost:
            if s.status != "refused":
                problems.append(
                    f"{inv.WRITE_MODE}: job {s.name} over data failed with {s.error}, "
                    "not a DestinationError"
                )
            nothing_of(s, inv.NOTHING_OF_FAILED)
    elif mode == "error":
        if len(won) == 2:
            problems.append(f"{inv.ONE_WRITER}: both jobs committed in mode 'error'")
        elif not won:
            problems.append(f"{inv.ONE_WRITER}: neither job committed (A: {a.error}; B: {b.error})")
        else:
            (loser,) = lost
            if loser.status != "refused":
                problems.append(
                    f"{inv.ONE_WRITER}: the losing job {loser.name} failed with "
                    f"{loser.error}, not a DestinationError"
                )
            nothing_of(loser, inv.ONE_WRITER)
    elif mode == "overwrite":
        present = [s for s in sides if files[s.name]]
        if len(present) == 2:
            problems.append(
                f"{inv.ONE_WRITER}: mode 'overwrite' left both jobs' output (the union: "
                f"{len(files['A'])} + {len(files['B'])} files)"
            )
        if not won:
            problems.append(f"{inv.ONE_WRITER}: neither job committed (A: {a.error}; B: {b.error})")
        for s in present:
            if s.status != "committed":
                problems.append(
                    f"{inv.NOTHING_OF_FAILED}: job {s.name} ({s.status}) left "
                    f"{len(files[s.name])} files visible"
                )
    else:  # append
        for s in lost:
            problems.append(f"{inv.WRITE_MODE}: job {s.name} in mode 'append' failed: {s.error}")
            nothing_of(s, inv.NOTHING_OF_FAILED)
    expected = [s.uuid for s in sides if files[s.name]]
    replaced = inv.replaced_by(mode, earlier) if won else set()
    problems += inv.check_earlier(store, earlier, visible, replaced)
    bad = inv.check_jobs(store, expected, ignore=earlier)
    problems += bad
    if won and not has_success:
        problems.append(f"{inv.NO_FALSE_SUCCESS}: a job committed but there is no _SUCCESS")
    if has_success and bad:
        problems.append(f"{inv.NO_FALSE_SUCCESS}: _SUCCESS over bad output: {bad[0]}")
    problems += inv.check_no_leftovers(store, allow)
    return problems


def run_concurrent(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    points: int = 6,
    progress: Callable[[int], None] | None = None,
) -> list[Scenario]:
    """Each write mode, on a fresh destination and on one holding data, with B's commit
    started at `points` operations of A's job commit (spread: the first, a seeded choice in
    between, and after the last)."""
    rng = random.Random(f"{seed}:concurrent")
    variants = [
        _Variant(dest, mode, (seeded_uuid(rng), seeded_uuid(rng), seeded_uuid(rng)))
        for dest in (FRESH, EXISTING)
        for mode in MODES
    ]
    runs: list[tuple[_Variant, int]] = []
    for v in variants:
        url = stores.url(f"c-{v.destination[0]}{v.mode}-base")
        _run(committer, url, options, v, None)
        discard(quiet_store(url))
        inner = list(range(v.start + 1, v.end))
        chosen = sorted(spread(inner, max(0, points - 2), rng))
        runs += [(v, i) for i in dict.fromkeys([v.start, *chosen, v.end])]
    out = []
    for v, index in runs:
        url = stores.url(f"c-{v.destination[0]}{v.mode}-{index}")
        scenario = _run(committer, url, options, v, index)
        scenario.schedule = (
            f"B's commit at op {index - v.start} of A's {v.end - v.start}"
            if index < v.end
            else "B's commit after A's"
        )
        discard(quiet_store(url))
        out.append(scenario)
        if progress:
            progress(len(runs))
    return out
