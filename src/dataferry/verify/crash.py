"""The crash-point harness: the referee for every committer.

1. Count: run the reference job once through a FaultStore with no faults, inline and in a fixed
   order, so every store operation of the whole job (task writes, task commits, job commit,
   cleanup) gets an index. N operations give 2N crash points: before and after each.
2. For each crash point, run the job on a fresh destination with a crash there, then do what a
   real engine would do: a crash inside a task attempt fails that attempt and a new one runs; a
   crash in the driver (job setup or commit) fails the job, which is recovered by `abort_job`
   and `cleanup_job` and then rerun with a new job id in overwrite mode (a rerun that fails
   counts as a `write_mode` violation: recovery left a destination no job can write).
3. Check the invariants (see `invariants.py`) at each step and count violations by name. A job
   that did not commit must, once recovered, be all there (a decided commit rolled forward,
   with `_SUCCESS`) or not at all, before the rerun replaces whatever it left.
4. Ambiguous answers, in the same run: at every traced rename, copy, multipart completion, PUT
   (write or create-if-absent) and delete, the store answers AmbiguousOutcome (a timeout),
   once `before` the operation took effect (it did not happen) and once `after` (it did); the
   store, the engine and the committer do what they do (the store asks an idempotent operation
   again; a committer retries, resolves by etag, or fails the job, which is then recovered as
   in 2) and the same invariants are checked. For each ambiguous rename,
   copy or completion whose destination is a data file, once more with another writer's file
   of the same name appearing there as the answer comes (a stale file of an earlier attempt or
   job): a committer that takes a lost request for done ("assume it worked", no etag check)
   then commits that file as its own, which `exclusive_output` and `no_false_success` see.

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
from ..store import FaultRule, Op, Store, crash_at, open_store
from ..store import fault_layer as find_fault_layer
from ..store.faults import TracedOp, ambiguous_at
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
    load_preload,
    quiet_store,
    recovery_committer,
    run_reference,
    seeded_uuid,
    write_earlier,
)
from .harness import engine as _engine
from .reference import file_bytes, parse_file, reference_tasks

__all__ = [
    "AMBIGUOUS_OPS",
    "AmbiguousPoint",
    "CrashReport",
    "Scenario",
    "ScenarioStores",
    "allowed_leftovers",
    "ambiguous_points",
    "deterministic_options",
    "run_ambiguous_scenario",
    "run_existing_scenario",
    "run_scenario",
    "verify_crash",
]

KINDS = ("crash", "ambiguous", "existing_crash", "driver_kill", "zombie", "concurrent")
Select = Callable[[TracedOp], bool]


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
    def ambiguous_points(self) -> int:
        """Ambiguous-answer scenarios run (before, after, and with another writer's file)."""
        return len(self.of_kind("ambiguous"))

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
            "ambiguous_points": self.ambiguous_points,
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
    # recovery: abort and clean up the failed job; it is then all there or not at all
    recovery = _recover(committer, store, com.new_job(job_id), options, problems)
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


def _recover(
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


# --- ambiguous answers -----------------------------------------------------------------------

# what a store can answer "timed out, outcome unknown" to, with an effect to be unsure about
AMBIGUOUS_OPS = frozenset(
    {Op.RENAME, Op.COPY, Op.MULTIPART_COMPLETE, Op.WRITE, Op.CREATE_IF_ABSENT, Op.DELETE}
)
# those that put a file at a destination another writer's file could occupy
DECOY_OPS = frozenset({Op.RENAME, Op.COPY, Op.MULTIPART_COMPLETE})
DECOY_JOB = "dec0dec0-0000-4000-8000-00000000dec0"  # the other writer (never a real job's id)


@dataclass(frozen=True)
class AmbiguousPoint:
    """One ambiguous answer: at operation `index`, `before` or `after` it took effect; with
    `decoy`, another writer's file of the same name appears at that destination meanwhile."""

    index: int
    when: str
    op: str
    path: str
    decoy: str = ""

    @property
    def schedule(self) -> str:
        what = f"ambiguous {self.when}"
        return f"{what}; meanwhile another writer's file at {self.decoy}" if self.decoy else what


def decoy_target(t: TracedOp) -> str:
    """Where a stale file could sit in the way of this operation: the data file a rename,
    copy or completed upload puts in place ('' for anything else)."""
    if t.op not in DECOY_OPS:
        return ""
    target = t.dest if t.op in (Op.RENAME, Op.COPY) else t.path
    return target if parse_file(target, b"") is not None else ""


def ambiguous_points(
    trace: list[TracedOp],
    *,
    every: int = 1,
    limit: int | None = None,
    select: Select | None = None,
) -> list[AmbiguousPoint]:
    """Every ambiguous answer for a trace: before and after each operation of AMBIGUOUS_OPS,
    and the decoy variant where one applies. `every` > 1 samples, yet keeps at least one
    point of each (operation kind, before/after, decoy) there is."""
    points: list[AmbiguousPoint] = []
    for t in trace:
        if t.op not in AMBIGUOUS_OPS or (select is not None and not select(t)):
            continue
        points += [AmbiguousPoint(t.index, w, t.op.value, t.path) for w in ("before", "after")]
        target = decoy_target(t)
        if target:
            points.append(AmbiguousPoint(t.index, "before", t.op.value, t.path, target))
    if every > 1:
        sampled = points[::every]
        seen = {(p.op, p.when, bool(p.decoy)) for p in sampled}
        for p in points:
            if (p.op, p.when, bool(p.decoy)) not in seen:
                seen.add((p.op, p.when, bool(p.decoy)))
                sampled.append(p)
        points = sorted(sampled, key=lambda p: (p.index, p.when, p.decoy))
    return points if limit is None else points[:limit]


def run_decoy_scenario(
    committer: str, url: str, index: int, options: dict[str, Any]
) -> tuple[Scenario, Store]:
    """The job with an ambiguous-before answer at operation `index` (a rename, copy or upload
    completion that did not happen), and meanwhile another writer's file of the same name at
    its destination. The committer may put its own file there, or fail (a decided commit it
    cannot finish may stay for an operator); it must never count the other file as its own:
    whenever `_SUCCESS` is there, after the job and after its recovery, the output must be
    exclusively and completely the job's."""
    holder: dict[str, Any] = {}

    def place(i: int, op: Op, path: str) -> None:
        fault = holder["fault"]
        target = fault.trace[i].dest if op in (Op.RENAME, Op.COPY) else path
        parsed = parse_file(target, b"")
        if parsed is not None:  # the same name, another writer's bytes (as long as ours)
            data = file_bytes(parsed.task, parsed.file, parsed.attempt, DECOY_JOB)
            fault.inner.write_bytes(target, data)

    store = open_store(url, faults=[ambiguous_at(index, "before", place)], latency_scale=0.0)
    fault = holder["fault"] = find_fault_layer(store)
    assert fault is not None
    scenario = Scenario(index=index, when="before", kind="ambiguous")
    job_id = new_job_id()
    com = make_committer(committer, store, allow_unsafe_rename=True, **options)
    try:
        _engine().run_job(com, reference_tasks(), job_id=job_id)
        scenario.outcome = "committed"
    except DataferryError as e:
        scenario.outcome = f"job_failed:{type(e).__name__}"
    fault.armed = False
    committed = scenario.outcome == "committed"
    problems = scenario.problems
    problems += inv.check_success(store, committed)
    if store.exists(inv.SUCCESS):
        problems += inv.check_output(store)
    if committed:
        return scenario, store
    _recover(committer, store, com.new_job(job_id), options, [])  # may stay for an operator
    if store.exists(inv.SUCCESS):
        problems += [
            f"{p.split(':', 1)[0]}: after recovery: {p.split(':', 1)[1].strip()}"
            for p in inv.check_success(store, False) + inv.check_output(store)
        ]
    return scenario, store


def run_ambiguous_scenario(
    committer: str, url: str, point: AmbiguousPoint, options: dict[str, Any]
) -> Scenario:
    """One ambiguous answer on a fresh destination, checked (then the destination discarded)."""
    if point.decoy:
        scenario, store = run_decoy_scenario(committer, url, point.index, options)
    else:
        rules = [ambiguous_at(point.index, point.when)]  # type: ignore[arg-type]
        scenario, store = run_scenario(committer, url, rules, options)
    scenario.kind, scenario.index, scenario.when = "ambiguous", point.index, point.when
    scenario.op, scenario.path, scenario.schedule = point.op, point.path, point.schedule
    discard(store)
    return scenario


def _one_ambiguous(args: tuple[str, str, AmbiguousPoint, dict[str, Any]]) -> Scenario:
    return run_ambiguous_scenario(*args)


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
    select: Select | None = None,
    preload: tuple[str, ...] = (),
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
        points = [
            (t.index, w) for t in trace if select is None or select(t) for w in ("before", "after")
        ][:: max(1, every)]
        if limit is not None:
            points = points[:limit]
        jobs += [
            (committer, stores.url(f"x-{mode}-{i}{w[0]}"), mode, i, w, options, uuids)
            for i, w in points
        ]
    if processes > 1:
        with ProcessPoolExecutor(processes, initializer=load_preload, initargs=(preload,)) as pool:
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
    ambiguous: bool = True,
    select: Select | None = None,
    preload: tuple[str, ...] = (),
) -> CrashReport:
    """Enumerate every crash point of the reference job for `committer` on `store` (or every
    `every`-th one, for a quicker sample on slow stores), and every ambiguous answer
    (`ambiguous_points`: before and after each rename, copy, upload completion, PUT and delete,
    and with another writer's file at a rename's destination; sampled the same way, keeping
    each kind of answer); then, as asked:

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
    ambiguous: run the ambiguous answers (on by default: they are part of the crash points).
    select: only crash points and ambiguous answers at the operations it accepts (a quick,
        targeted run; the crash-free baseline always runs).
    preload: modules (`module` or `module:function`, the function then called) imported first,
        here, in worker processes and in child drivers: how a committer outside the built-in
        registry (a test's deliberately broken one, a user's own) adds its registry row.
    """
    from .concurrent import run_concurrent
    from .driver_kills import run_driver_kills
    from .zombies import run_zombies

    preload = tuple(preload)
    load_preload(preload)
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
        points = [
            (t, when) for t in trace if select is None or select(t) for when in ("before", "after")
        ]
        points = points[:: max(1, every)]
        if limit is not None:
            points = points[:limit]
        jobs = [
            (committer, stores.url(f"k{t.index}{w[0]}"), t.index, w, options) for t, w in points
        ]
        tick = part()
        scenarios = _run_all(_one, jobs, processes, preload, tick)
        for s, (t, _w) in zip(scenarios, points, strict=True):
            s.op, s.path = t.op.value, t.path
        report = CrashReport(committer, store or "local", len(trace), [base, *scenarios], seed=seed)
        if ambiguous:
            answers = ambiguous_points(trace, every=max(1, every), limit=limit, select=select)
            names = [f"a{p.index}{p.when[0]}{'d' if p.decoy else ''}" for p in answers]
            report.extra += _run_all(
                _one_ambiguous,
                [
                    (committer, stores.url(n), p, options)
                    for n, p in zip(names, answers, strict=True)
                ],
                processes,
                preload,
                part(),
            )
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
                    preload=preload,
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
                select=select,
                preload=preload,
            )
        return report
    finally:
        stores.close()


def _run_all(
    fn: Callable[[Any], Scenario],
    jobs: list[Any],
    processes: int,
    preload: tuple[str, ...],
    tick: Callable[[int], None],
) -> list[Scenario]:
    """Scenarios in order, inline or on `processes` worker processes (each preloaded)."""
    out: list[Scenario] = []
    if processes > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(processes, initializer=load_preload, initargs=(preload,)) as pool:
            for s in pool.map(fn, jobs, chunksize=4):
                out.append(s)
                tick(len(jobs))
    else:
        for j in jobs:
            out.append(fn(j))
            tick(len(jobs))
    return out
