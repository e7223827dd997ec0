"""The crash-point harness: the referee for every committer.

1. Count: run the reference job once through a FaultStore with no faults, inline and in a fixed
   order, so every store operation of the whole job (task writes, task commits, job commit,
   cleanup) gets an index. N operations give 2N crash points: before and after each.
2. For each crash point, run the job on a fresh destination with a crash there, then do what a
   real engine would do: a crash inside a task attempt fails that attempt and a new one runs; a
   crash in the driver (job setup or commit) fails the job, which is recovered by `abort_job`
   and `cleanup_job` and then rerun with a new job id in overwrite mode (a rerun that fails
   counts as a `write_mode` violation: recovery left a destination no job can write).
3. Check the invariants (see `invariants.py`) at each step and count violations by name.

`verify_crash` also runs, on request, the kinds of failure one live process cannot show, each in
its own module: drivers killed for real during job commit (`driver_kills.py`), zombie task
attempts that commit after the driver gave up on them (`zombies.py`), two jobs committing into one
destination at once (`concurrent.py`); and the crash points again on a destination that already
holds a committed data set, in each write mode (`run_existing_scenario`).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..commit.factory import make_committer
from ..errors import DataferryError, InjectedCrash
from ..ids import new_job_id
from ..store import FaultRule, Store, crash_at, open_store
from ..store import fault_layer as find_fault_layer
from . import invariants as inv
from .harness import (
    EXISTING,
    MODES,
    Scenario,
    ScenarioStores,
    allowed_leftovers,
    check_outcome,
    check_rerun,
    deterministic_options,
    discard,
    job_committer,
    quiet_store,
    recovery_committer,
    run_reference,
    seeded_uuid,
    write_earlier,
)
from .harness import engine as _engine
from .reference import reference_tasks

__all__ = [
    "CrashReport",
    "Scenario",
    "ScenarioStores",
    "allowed_leftovers",
    "deterministic_options",
    "run_existing_scenario",
    "run_scenario",
    "verify_crash",
]

KINDS = ("crash", "existing_crash", "driver_kill", "zombie", "concurrent")


@dataclass
class CrashReport:
    committer: str
    store: str
    crash_points: int
    scenarios: list[Scenario]  # the crash points on a fresh destination, and the crash-free run
    extra: list[Scenario] = field(default_factory=list)  # every other kind (Scenario.kind)
    skipped: dict[str, str] = field(default_factory=dict)  # kind -> why it did not run
    seed: int = 0

    @property
    def all_scenarios(self) -> list[Scenario]:
        return [*self.scenarios, *self.extra]

    def of_kind(self, kind: str) -> list[Scenario]:
        return [s for s in self.all_scenarios if s.kind == kind]

    @staticmethod
    def _count(scenarios: list[Scenario]) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for s in scenarios:
            counts.update(s.violated)
        return {name: counts.get(name, 0) for name in inv.ALL}

    @property
    def violations(self) -> dict[str, int]:
        """Violating scenarios per invariant, over every kind that ran."""
        return self._count(self.all_scenarios)

    @property
    def total_violations(self) -> int:
        return sum(self.violations.values())

    @property
    def outcomes(self) -> dict[str, int]:
        return dict(Counter(s.outcome for s in self.scenarios))

    @property
    def driver_kills(self) -> int:
        """Kill scenarios run (a child driver armed to die; the kill-free baselines not counted)."""
        return sum(1 for s in self.extra if s.kind == "driver_kill" and s.index is not None)

    @property
    def zombie_schedules(self) -> int:
        return len(self.of_kind("zombie"))

    @property
    def concurrent_runs(self) -> int:
        return len(self.of_kind("concurrent"))

    def kinds(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for kind in KINDS:
            group = self.of_kind(kind)
            if not group:
                continue
            v = self._count(group)
            out[kind] = {
                "scenarios": len(group),
                "outcomes": dict(Counter(s.outcome for s in group)),
                "violations": v,
                "total_violations": sum(v.values()),
                "violating_scenarios": sum(1 for s in group if s.problems),
            }
        return out

    def to_json(self, examples: int = 20) -> dict[str, Any]:
        bad = [s for s in self.all_scenarios if s.problems]
        # one example per kind and violated invariant first, then the rest in order
        first: dict[tuple[str, str], Scenario] = {}
        for s in bad:
            for name in sorted(s.violated):
                first.setdefault((s.kind, name), s)
        picked = list(dict.fromkeys([*first.values(), *bad]))
        return {
            "committer": self.committer,
            "store": self.store,
            "crash_points": self.crash_points,
            "scenarios": len(self.scenarios),
            "outcomes": self.outcomes,
            "violations": self.violations,
            "total_violations": self.total_violations,
            "violating_scenarios": len(bad),
            "driver_kills": self.driver_kills,
            "zombie_schedules": self.zombie_schedules,
            "concurrent_runs": self.concurrent_runs,
            "existing_data_crash_points": len(self.of_kind("existing_crash")),
            "kinds": self.kinds(),
            "skipped": dict(self.skipped),
            "seed": self.seed,
            "examples": [s.example() for s in picked[:examples]],
        }


def run_scenario(
    committer: str,
    url: str,
    rules: list[FaultRule],
    options: dict[str, Any] | None = None,
) -> tuple[Scenario, Store]:
    """One scenario on a fresh destination; returns it with its problems, and the store."""
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
    com = make_committer(committer, store, allow_unsafe_rename=True, **options)
    try:
        _engine().run_job(com, reference_tasks(), job_id=job_id, before_job_commit=before_commit)
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
        problems.extend(inv.check_no_leftovers(store, allowed_leftovers(com)))
        return scenario, store
    # recovery: abort and clean up the failed job, then rerun it as a new job
    failed = com.new_job(job_id)
    recovery = make_committer(committer, store, allow_unsafe_rename=True, **options)
    recovery.abort_job(failed)
    recovery.cleanup_job(failed)
    problems.extend(inv.check_no_leftovers(store, allowed_leftovers(recovery)))

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


def _one(args: tuple[str, str, int, str, dict[str, Any]]) -> Scenario:
    committer, url, index, when, options = args
    scenario, store = run_scenario(committer, url, [crash_at(index, when)], options)  # type: ignore[arg-type]
    scenario.index, scenario.when = index, when
    discard(store)
    return scenario


# --- the crash points again, on a destination that already holds data ---------------------------


def run_existing_scenario(
    committer: str,
    url: str,
    mode: str,
    rules: list[FaultRule],
    options: dict[str, Any],
    uuids: tuple[str, str],
) -> tuple[Scenario, list]:
    """One crash scenario of a job in `mode` into a destination holding a committed data set
    (written first by another job, `uuids[0]`; the job under test is `uuids[1]`).

    A crashed or failed job is aborted and cleaned up as in `run_scenario`; then the earlier data
    must be exactly as it was, or the job all there as its mode says. Then a rerun in the same
    mode must do what the mode says (`error`: be refused)."""
    scenario = Scenario(index=None, when="", kind="existing_crash", mode=mode, destination=EXISTING)
    earlier = write_earlier(committer, url, options, uuids[0])
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
        try:
            recovery.abort_job(failed)
            recovery.cleanup_job(failed)
        except Exception as e:
            scenario.problems.append(f"{inv.NO_LEFTOVERS}: abort/cleanup raised {e!r}")
    scenario.problems += check_outcome(plain, out.job_uuid, mode, earlier, reported, allow)
    if mode == "error":
        scenario.problems += check_rerun(committer, url, options, allow)
    else:
        before = inv.snapshot(plain)
        rerun = run_reference(committer, plain, mode, options)
        scenario.problems += [
            f"{p.split(':', 1)[0]}: rerun: {p.split(':', 1)[1].strip()}"
            for p in check_outcome(plain, rerun.job_uuid, mode, before, rerun.status, allow)
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
) -> list[Scenario]:
    """Every crash point of a job in each write mode into a destination holding data."""
    rng = random.Random(f"{seed}:existing")
    jobs = []
    out: list[Scenario] = []
    for mode in MODES:
        uuids = (seeded_uuid(rng), seeded_uuid(rng))
        url = stores.url(f"x-{mode}-base")
        scenario, trace = run_existing_scenario(committer, url, mode, [], options, uuids)
        scenario.when = "none"
        discard(quiet_store(url))
        out.append(scenario)
        points = [(t.index, w) for t in trace for w in ("before", "after")][:: max(1, every)]
        if limit is not None:
            points = points[:limit]
        jobs += [
            (committer, stores.url(f"x-{mode}-{i}{w[0]}"), mode, i, w, options, uuids)
            for i, w in points
        ]
    if processes > 1:
        with ProcessPoolExecutor(processes) as pool:
            for s in pool.map(_one_existing, jobs, chunksize=4):
                out.append(s)
                if progress:
                    progress(len(jobs))
    else:
        for j in jobs:
            out.append(_one_existing(j))
            if progress:
                progress(len(jobs))
    return out


def verify_crash(
    committer: str,
    store: str | None = None,
    *,
    options: dict[str, Any] | None = None,
    processes: int = 1,
    limit: int | None = None,
    every: int = 1,
    progress: Callable[[int, int], None] | None = None,
    driver_kills: int = 0,
    zombies: bool = False,
    concurrent_jobs: bool = False,
    existing_data: bool = False,
    seed: int = 0,
    kill_timeout_s: float = 60.0,
    zombie_points: int | None = None,
    concurrent_points: int = 6,
) -> CrashReport:
    """Enumerate every crash point of the reference job for `committer` on `store` (or every
    `every`-th one, for a quicker sample on slow stores); then, as asked:

    driver_kills: this many kill points spread over the job commit (seeded by `seed`), on a
        fresh destination and on one holding data in each write mode; each a child process
        SIGKILLed there, then `dataferry cleanup` and a rerun (see `driver_kills.py`).
    zombies: zombie task attempts committing before, during (at every store operation, or
        `zombie_points` of them spread) and after the job commit, fresh and over data in each
        mode (see `zombies.py`).
    concurrent_jobs: two jobs committing into one destination at once, the second starting
        at `concurrent_points` operations of the first's job commit, in each mode, fresh and
        over data (see `concurrent.py`).
    existing_data: every crash point again, for a job in each write mode into a destination
        that holds a committed data set (3x the crash points).
    """
    from .concurrent import run_concurrent
    from .driver_kills import run_driver_kills
    from .zombies import run_zombies

    options = {**deterministic_options(committer), **(options or {})}
    stores = ScenarioStores(store)
    counts = {"done": 0, "planned": 0}

    def part() -> Callable[[int], None]:
        """tick(total) after each scenario of one part, `total` being the part's size as far
        as it knows (it learns it from its baselines)."""
        known = 0

        def tick(total: int) -> None:
            nonlocal known
            counts["planned"] += max(0, total - known)
            known = max(known, total)
            counts["done"] += 1
            if progress:
                progress(counts["done"], max(counts["planned"], counts["done"]))

        return tick

    try:
        base, trace = baseline(committer, stores, options)
        points = [(t, when) for t in trace for when in ("before", "after")]
        points = points[:: max(1, every)]
        if limit is not None:
            points = points[:limit]
        jobs = [
            (committer, stores.url(f"k{t.index}{w[0]}"), t.index, w, options) for t, w in points
        ]
        tick = part()
        scenarios: list[Scenario] = []
        if processes > 1:
            with ProcessPoolExecutor(processes) as pool:
                for s in pool.map(_one, jobs, chunksize=4):
                    scenarios.append(s)
                    tick(len(jobs))
        else:
            for j in jobs:
                scenarios.append(_one(j))
                tick(len(jobs))
        for s, (t, _w) in zip(scenarios, points, strict=True):
            s.op, s.path = t.op.value, t.path
        report = CrashReport(committer, store or "local", len(trace), [base, *scenarios], seed=seed)
        if driver_kills > 0:
            if stores.shared_between_processes:
                report.extra += run_driver_kills(
                    committer,
                    stores,
                    options,
                    driver_kills,
                    seed=seed,
                    timeout_s=kill_timeout_s,
                    workers=max(processes, min(2, os.cpu_count() or 1)),
                    progress=part(),
                )
            else:
                report.skipped["driver_kill"] = (
                    f"{stores.base} is private to one process: a killed child driver's "
                    "destination would vanish with it"
                )
        if zombies:
            report.extra += run_zombies(
                committer, stores, options, seed=seed, max_points=zombie_points, progress=part()
            )
        if concurrent_jobs:
            report.extra += run_concurrent(
                committer,
                stores,
                options,
                seed=seed,
                points=concurrent_points,
                progress=part(),
            )
        if existing_data:
            report.extra += existing_crash_points(
                committer,
                stores,
                options,
                seed=seed,
                every=every,
                limit=limit,
                processes=processes,
                progress=part(),
            )
        return report
    finally:
        stores.close()
