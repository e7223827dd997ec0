"""The crash points again, for a job in each write mode (a partition overwrite too) into a
destination that already holds a committed data set, spread over one partition more than the
job writes: the earlier data must stay exactly as it was, or the job be all there as
its mode says, and a rerun must do what the mode says."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ..commit.registry import KNOWN
from ..errors import InjectedCrash
from ..store import FaultRule, crash_at, open_store
from ..store import fault_layer as find_fault_layer
from . import invariants as inv
from .earlier import write_earlier
from .harness import (
    EXISTING,
    EXISTING_MODES,
    Scenario,
    ScenarioStores,
    allowed_leftovers,
    check_outcome,
    check_rerun,
    discard,
    quiet_store,
    recovery_committer,
    run_reference,
    seeded_uuid,
)
from .reference import WIDE_PARTITIONS
from .scenario import Select, crash_points, rolled_back, run_scenarios


def run_existing_scenario(
    committer: str,
    url: str,
    mode: str,
    rules: list[FaultRule],
    options: dict[str, Any],
    uuids: tuple[str, str],
    rollback: bool = False,
    again: bool = True,
) -> tuple[Scenario, list]:
    """One crash scenario of a job in `mode` into a destination holding a committed data set
    (written first by another job, `uuids[0]`; the job under test is `uuids[1]`).

    A crashed or failed job is aborted and cleaned up as in `run_scenario`; then the earlier data
    must be exactly as it was, or the job all there as its mode says. Then a rerun in the same
    mode must do what the mode says (`error`: be refused). `rollback`: the job is recovered
    by `dataferry cleanup --rollback` instead (`scenario.rolled_back`); `again=False` skips the
    rerun (a quick sample of the recovery alone)."""
    scenario = Scenario(index=None, when="", kind="existing_crash", mode=mode, destination=EXISTING)
    earlier = write_earlier(committer, url, options, uuids[0], partitions=WIDE_PARTITIONS)
    store = open_store(url, faults=rules, latency_scale=0.0)
    fault = find_fault_layer(store)
    assert fault is not None
    try:
        out = run_reference(committer, store, mode, options, uuids[1])
    except InjectedCrash as e:
        out = e.outcome  # type: ignore[attr-defined]
    fault.armed = False
    trace = list(fault.trace)
    scenario.outcome = {"crashed": "driver_crashed"}.get(out.status, out.status)
    plain = quiet_store(url)
    recovery = recovery_committer(committer, plain, mode, options)
    allow = allowed_leftovers(recovery)
    reported = out.status
    if out.status == "crashed" or out.status.startswith("failed:"):
        failed = recovery.new_job(out.job_id)
        if rollback:
            scenario.kind = "existing_rolled_back"
            rolled_back(committer, plain, failed, options, scenario.problems)
        else:
            try:
                recovery.abort_job(failed)
                recovery.cleanup_job(failed)
            except Exception as e:
                scenario.problems.append(f"{inv.NO_LEFTOVERS}: abort/cleanup raised {e!r}")
    # what the mode replaces, in the common modes' words (Hive's overwrite: the partitions)
    means = KNOWN[committer].committer_class().mode_meanings.get(mode, mode)
    scenario.problems += check_outcome(plain, out.job_uuid, means, earlier, reported, allow)
    if again and mode == "error":
        scenario.problems += check_rerun(committer, url, options, allow)
    elif again:
        before = inv.snapshot(plain)
        rerun = run_reference(committer, plain, mode, options)
        scenario.problems += [
            f"{p.split(':', 1)[0]}: rerun: {p.split(':', 1)[1].strip()}"
            for p in check_outcome(plain, rerun.job_uuid, means, before, rerun.status, allow)
        ]
        if not rerun.committed:
            scenario.problems.append(
                f"{inv.WRITE_MODE}: rerun in mode {mode!r} after recovery failed: {rerun.error}"
            )
    return scenario, trace


def _one_existing(args: tuple[str, str, str, int | None, str, dict[str, Any], tuple]) -> Scenario:
    committer, url, mode, index, when, options, uuids = args
    rules = [] if index is None else [crash_at(index, when)]  # type: ignore[arg-type]
    scenario, trace = run_existing_scenario(committer, url, mode, rules, options, uuids)
    scenario.index, scenario.when = index, when if index is not None else "none"
    if index is not None and index < len(trace):
        scenario.op, scenario.path = trace[index].op.value, trace[index].path
    discard(quiet_store(url))
    return scenario


def existing_crash_points(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    every: int = 1,
    limit: int | None = None,
    processes: int = 1,
    progress: Callable[[int], None] | None = None,
    select: Select | None = None,
    preload: tuple[str, ...] = (),
) -> list[Scenario]:
    """Every crash point of a job in each write mode into a destination holding data."""
    rng = random.Random(f"{seed}:existing")
    jobs = []
    out: list[Scenario] = []
    for mode in EXISTING_MODES:
        uuids = (seeded_uuid(rng), seeded_uuid(rng))
        url = stores.url(f"x-{mode}-base")
        scenario, trace = run_existing_scenario(committer, url, mode, [], options, uuids)
        scenario.when = "none"
        discard(quiet_store(url))
        out.append(scenario)
        jobs += [
            (committer, stores.url(f"x-{mode}-{t.index}{w[0]}"), mode, t.index, w, options, uuids)
            for t, w in crash_points(trace, every=every, limit=limit, select=select)
        ]
    tick = progress or (lambda _total: None)
    return out + run_scenarios(_one_existing, jobs, processes, preload, tick)
