"""The crash-point harness: the referee for every committer.

1. Count: run the reference job once through a FaultStore with no faults, inline and in a fixed
   order, so every store operation of the whole job (task writes, task commits, job commit,
   cleanup) gets an index. N operations give 2N crash points: before and after each.
2. For each crash point, run the job on a fresh destination with a crash there, then do what a
   real engine would do: a crash inside a task attempt fails that attempt and a new one runs; a
   crash in the driver (job setup or commit) fails the job, which is recovered by `abort_job`
   and `cleanup_job` and then rerun with a new job id in overwrite mode.
3. Check the invariants (see `invariants.py`) at each step and count violations by name.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..commit.destination import prepare_destination
from ..commit.factory import make_committer
from ..engine.local import LocalEngine
from ..errors import DataferryError, InjectedCrash
from ..ids import new_job_id
from ..store import FaultRule, Store, crash_at, open_store
from ..store import fault_layer as find_fault_layer
from . import invariants as inv
from .reference import SPECULATIVE_TASK, reference_tasks


@dataclass(eq=False)
class Scenario:
    index: int | None
    when: str
    op: str = ""
    path: str = ""
    outcome: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def violated(self) -> set[str]:
        return {p.split(":", 1)[0] for p in self.problems}


@dataclass
class CrashReport:
    committer: str
    store: str
    crash_points: int
    scenarios: list[Scenario]

    @property
    def violations(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for s in self.scenarios:
            counts.update(s.violated)
        return {name: counts.get(name, 0) for name in inv.ALL}

    @property
    def total_violations(self) -> int:
        return sum(self.violations.values())

    @property
    def outcomes(self) -> dict[str, int]:
        return dict(Counter(s.outcome for s in self.scenarios))

    def to_json(self, examples: int = 20) -> dict[str, Any]:
        bad = [s for s in self.scenarios if s.problems]
        # one example per violated invariant first, then the rest in crash-point order
        first = {}
        for s in bad:
            for name in sorted(s.violated):
                first.setdefault(name, s)
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
            "examples": [
                {
                    "index": s.index,
                    "when": s.when,
                    "op": s.op,
                    "path": s.path,
                    "outcome": s.outcome,
                    "problems": s.problems,
                }
                for s in picked[:examples]
            ],
        }


class ScenarioStores:
    """Fresh, empty destinations for scenarios, under one base URL."""

    def __init__(self, base: str | None) -> None:
        self._tmp: str | None = None
        if base is None or base == "local":
            self._tmp = tempfile.mkdtemp(prefix="dataferry-crash-")
            base = self._tmp
        elif base.startswith("sim:") and base.count(":") == 1:
            self._tmp = tempfile.mkdtemp(prefix="dataferry-crash-")
            base = f"{base}:{self._tmp}"
        self.base = base.rstrip("/")

    def url(self, name: str) -> str:
        suffix = f"{name}-{uuid.uuid4().hex[:8]}"
        return f"{self.base}/{suffix}"

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)


def _engine() -> LocalEngine:
    return LocalEngine(workers=0, speculate_tasks=(SPECULATIVE_TASK,), max_attempts=4)


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
    prepare_destination(store, "overwrite")
    rerun = make_committer(committer, store, allow_unsafe_rename=True, **options)
    _engine().run_job(rerun, reference_tasks(), before_job_commit=before_commit)
    problems.extend(inv.check_success(store, True))
    problems.extend(inv.check_output(store))
    problems.extend(inv.check_no_leftovers(store, allowed_leftovers(rerun)))
    return scenario, store


def deterministic_options(committer: str) -> dict[str, Any]:
    """Options that make a committer's store operations run in one fixed order: a committer
    with an I/O pool runs it with one thread, so every crash point has a stable index."""
    import dataclasses

    from ..commit.factory import REGISTRY, known_committers

    known_committers()  # registers optional committers
    kind = REGISTRY.get(committer)
    if kind is None:
        return {}
    fields = {f.name for f in dataclasses.fields(kind.config_type)}
    pools = ("io_threads", "move_threads", "load_partition_threads")
    return {name: 1 for name in pools if name in fields}


def allowed_leftovers(committer: Any) -> tuple[str, ...]:
    """Hidden names a committer legitimately leaves in the destination after a job."""
    return (inv.SUCCESS, *getattr(committer, "permanent_entries", ()))


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
    _discard(store)
    return scenario, trace


def _discard(store: Store) -> None:
    try:
        store.delete("", recursive=True)
    except Exception:
        pass


def _one(args: tuple[str, str, int, str, dict[str, Any]]) -> Scenario:
    committer, url, index, when, options = args
    scenario, store = run_scenario(committer, url, [crash_at(index, when)], options)  # type: ignore[arg-type]
    scenario.index, scenario.when = index, when
    _discard(store)
    return scenario


def verify_crash(
    committer: str,
    store: str | None = None,
    *,
    options: dict[str, Any] | None = None,
    processes: int = 1,
    limit: int | None = None,
    every: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> CrashReport:
    """Enumerate every crash point of the reference job for `committer` on `store` (or every
    `every`-th one, for a quicker sample on slow stores)."""
    options = {**deterministic_options(committer), **(options or {})}
    stores = ScenarioStores(store)
    try:
        base, trace = baseline(committer, stores, options)
        points = [(t, when) for t in trace for when in ("before", "after")]
        points = points[:: max(1, every)]
        if limit is not None:
            points = points[:limit]
        jobs = [
            (committer, stores.url(f"k{t.index}{w[0]}"), t.index, w, options) for t, w in points
        ]
        scenarios: list[Scenario] = []
        if processes > 1:
            with ProcessPoolExecutor(processes) as pool:
                for s in pool.map(_one, jobs, chunksize=4):
                    scenarios.append(s)
                    if progress:
                        progress(len(scenarios), len(jobs))
        else:
            for j in jobs:
                scenarios.append(_one(j))
                if progress:
                    progress(len(scenarios), len(jobs))
        for s, (t, _w) in zip(scenarios, points, strict=True):
            s.op, s.path = t.op.value, t.path
        return CrashReport(committer, store or "local", len(trace), [base, *scenarios])
    finally:
        stores.close()
