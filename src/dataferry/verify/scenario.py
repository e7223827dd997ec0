"""One crash scenario of the reference job on a fresh destination, and the crash-free baseline
whose trace indexes the crash points.

A crash inside a task attempt fails that attempt and a new one runs; a crash in the driver
fails the job, which is recovered by `abort_job` and `cleanup_job` and rerun with a new job id
in overwrite mode. The invariants (`invariants.py`) are checked at each step.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from ..commit.factory import make_committer
from ..engine.pool import worker_context
from ..errors import DataferryError, InjectedCrash
from ..ids import new_job_id
from ..store import FaultRule, Store, crash_at, open_store
from ..store import fault_layer as find_fault_layer
from ..store.faults import TracedOp
from . import invariants as inv
from .harness import (
    Scenario,
    ScenarioStores,
    allowed_leftovers,
    check_outcome,
    discard,
    job_committer,
    load_preload,
)
from .harness import engine as _engine
from .reference import reference_tasks

Select = Callable[[TracedOp], bool]  # which traced operations get crash points


def run_scenario(
    committer: str,
    url: str,
    rules: list[FaultRule],
    options: dict[str, Any] | None = None,
    rollback: bool = False,
) -> tuple[Scenario, Store]:
    """One scenario on a fresh destination; returns it with its problems, and the store.
    rollback: a failed job is recovered as `dataferry cleanup --rollback` recovers it (a
    decided Hive load undone from its journal), not by its driver's abort (which finishes it)."""
    options = options or {}
    store = open_store(url, faults=rules, latency_scale=0.0)
    fault = find_fault_layer(store)
    assert fault is not None
    scenario = Scenario(index=None, when="")
    problems = scenario.problems

    def quiet(check: Callable[[], list[str]]) -> None:
        armed, fault.armed = fault.armed, False
        try:
            problems.extend(check())
        finally:
            fault.armed = armed

    in_place = getattr(
        make_committer(committer, store, allow_unsafe_rename=True, **options),
        "writes_in_place",
        False,
    )

    def before_commit(_job: Any) -> None:
        quiet(lambda: inv.check_nothing_visible(store, in_place))

    job_id = new_job_id()
    under_test = make_committer(committer, store, allow_unsafe_rename=True, **options)
    try:
        _engine().run_job(
            under_test, reference_tasks(), job_id=job_id, before_job_commit=before_commit
        )
        scenario.outcome = "committed"
    except InjectedCrash:
        scenario.outcome = "driver_crashed"
    except DataferryError as e:
        scenario.outcome = f"job_failed:{type(e).__name__}"
    fault.armed = False
    committed = scenario.outcome == "committed"
    problems.extend(inv.check_success(store, committed))
    if committed:
        problems.extend(inv.check_output(store))
        problems.extend(inv.check_no_leftovers(store, allowed_leftovers(under_test)))
        return scenario, store
    # recovery: abort and clean up the failed job; it is then all there or not at all
    failed = under_test.new_job(job_id)
    recovery = (rolled_back if rollback else recover_job)(
        committer, store, failed, options, problems
    )
    reported = "crashed" if scenario.outcome == "driver_crashed" else "failed"
    problems.extend(
        check_outcome(store, job_id.uuid, "append", {}, reported, allowed_leftovers(recovery))
    )
    # then rerun it as a new job, which must commit whatever the failed one left

    def before_rerun_commit(job: Any) -> None:  # the failed job's data may be there
        quiet(lambda: inv.check_nothing_visible(store, in_place, job.job_uuid))

    try:
        rerun = job_committer(committer, store, "overwrite", options)
        _engine().run_job(rerun, reference_tasks(), before_job_commit=before_rerun_commit)
    except DataferryError as e:
        problems.append(
            f"{inv.WRITE_MODE}: the rerun in mode 'overwrite' after recovery failed: "
            f"{type(e).__name__}: {e}"
        )
        return scenario, store
    problems.extend(inv.check_success(store, True))
    problems.extend(inv.check_output(store))
    problems.extend(inv.check_no_leftovers(store, allowed_leftovers(rerun)))
    return scenario, store


def recover_job(
    committer: str, store: Store, failed: Any, options: dict[str, Any], problems: list[str]
) -> Any:
    """What the driver of a failed job does: abort it and clean up (a failure is reported)."""
    recovery = make_committer(committer, store, allow_unsafe_rename=True, **options)
    try:
        recovery.abort_job(failed)
        recovery.cleanup_job(failed)
    except Exception as e:
        problems.append(
            f"{inv.NO_LEFTOVERS}: recovering the failed job (abort_job, cleanup_job) raised "
            f"{type(e).__name__}: {e}"
        )
    return recovery


def baseline(
    committer: str, stores: ScenarioStores, options: dict[str, Any]
) -> tuple[Scenario, list]:
    """The job with no crash at all: its problems, and the trace that indexes crash points."""
    scenario, store = run_scenario(committer, stores.url("baseline"), [], options)
    if scenario.outcome != "committed":
        raise DataferryError(
            f"the reference job does not commit with {committer} even without a crash: "
            f"{scenario.outcome}"
        )
    scenario.when = "none"
    fault = find_fault_layer(store)
    trace = list(fault.trace) if fault else []
    discard(store)
    return scenario, trace


def rolled_back(
    committer: str, store: Store, failed: Any, options: dict[str, Any], problems: list[str]
) -> Any:
    """What a user who undoes a dead job runs: `dataferry cleanup DEST --older-than 0
    --rollback` (the job's driver counts as dead: it crashed)."""
    from ..commit.job.cleanup import cleanup_destination

    try:
        report = cleanup_destination(store, older_than_s=0.0, rollback=True)
    except Exception as e:
        problems.append(
            f"{inv.NO_LEFTOVERS}: dataferry cleanup --rollback raised {type(e).__name__}: {e}"
        )
    else:
        problems.extend(
            f"{inv.NO_LEFTOVERS}: dataferry cleanup --rollback left {path}: {why}"
            for path, why in report.failed.items()
        )
    return make_committer(committer, store, allow_unsafe_rename=True, **options)


def run_crash_point(args: tuple[str, str, int, str, dict[str, Any], bool]) -> Scenario:
    committer, url, index, when, options, rollback = args
    rules = [crash_at(index, when)]  # type: ignore[arg-type]
    scenario, store = run_scenario(committer, url, rules, options, rollback)
    scenario.index, scenario.when = index, when
    if rollback:
        scenario.kind = "rolled_back"
    discard(store)
    return scenario


def crash_points(
    trace: list[TracedOp], *, every: int = 1, limit: int | None = None, select: Select | None = None
) -> list[tuple[TracedOp, str]]:
    """(operation, "before" or "after") for each operation of a trace that `select` accepts,
    every `every`-th one, at most `limit`."""
    points = [
        (t, when) for t in trace if select is None or select(t) for when in ("before", "after")
    ][:: max(1, every)]
    return points if limit is None else points[:limit]


def run_scenarios(
    fn: Callable[[Any], Scenario],
    jobs: list[Any],
    processes: int,
    preload: tuple[str, ...],
    tick: Callable[[int], None],
) -> list[Scenario]:
    """Scenarios in order, inline or on `processes` worker processes (each preloaded)."""
    out: list[Scenario] = []
    if processes > 1 and len(jobs) > 1:
        from .tables import active

        # forked from a clean server, not from this process: a fork of a process with
        # threads (a test run's, an engine's) can stop for good in a lock another thread held
        with ProcessPoolExecutor(
            processes,
            mp_context=worker_context(),
            initializer=_worker_init,
            initargs=(preload, active(), dict(os.environ)),
        ) as pool:
            # chunks of 4 where there are many; a few scenarios go one to a process
            chunk = max(1, min(4, len(jobs) // (4 * processes)))
            for s in pool.map(fn, jobs, chunksize=chunk):
                out.append(s)
                tick(len(jobs))
    else:
        for j in jobs:
            out.append(fn(j))
            tick(len(jobs))
    return out


def _worker_init(
    preload: tuple[str, ...], table: tuple[str, dict[str, Any]] | None, environ: dict[str, str]
) -> None:
    """A worker process: the parent's environment (its servers' endpoints and credentials),
    the preloads, then read destinations as the parent does."""
    from .tables import reading

    os.environ.clear()
    os.environ.update(environ)
    load_preload(preload)
    reading(*table) if table else reading(None)


def run_threads(
    runs: list[Callable[[], Scenario]],
    workers: int,
    name: str,
    progress: Callable[[int], None] | None = None,
    then: Callable[[], list[Callable[[], Scenario]]] | None = None,
) -> list[Scenario]:
    """`runs` on `workers` threads (most of each is waiting for a child driver), then, where
    given, the runs `then()` plans from what the first ones found (their baselines);
    `progress(total)` after each scenario, baselines counted once the total is known."""
    lock = threading.Lock()

    def ticked(total: int) -> Callable[[Callable[[], Scenario]], Scenario]:
        def one(run: Callable[[], Scenario]) -> Scenario:
            s = run()
            if progress:
                with lock:
                    progress(total)
            return s

        return one

    with ThreadPoolExecutor(max(1, workers), thread_name_prefix=f"dataferry-{name}") as pool:
        if then is None:
            return list(pool.map(ticked(len(runs)), runs))
        out = list(pool.map(lambda run: run(), runs))
        planned = then()
        total = len(out) + len(planned)
        if progress:
            for _ in out:
                progress(total)
        return out + list(pool.map(ticked(total), planned))
