"""The crash-point harness: the referee for every committer.

1. Count: run the reference job once through a FaultStore with no faults, inline and in a fixed
   order, so every store operation of the whole job (task writes, task commits, job commit,
   cleanup) gets an index. N operations give 2N crash points: before and after each
   (`scenario.baseline`).
2. For each crash point, run the job on a fresh destination with a crash there, then do what a
   real engine would do: a crash inside a task attempt fails that attempt and a new one runs; a
   crash in the driver (job setup or commit) fails the job, which is recovered by `abort_job`
   and `cleanup_job` and then rerun with a new job id in overwrite mode (a rerun that fails
   counts as a `write_mode` violation: recovery left a destination no job can write)
   (`scenario.run_scenario`).
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
   then commits that file as its own, which `exclusive_output` and `no_false_success` see
   (`ambiguous.py`).

What was found is a `CrashReport` (`crash_report.py`).

`verify_crash` also runs, on request, the kinds of failure one live process cannot show, each in
its own module: drivers killed for real during job commit (`driver_kills.py`), zombie task
attempts that commit after the driver gave up on them (`zombies.py`), two jobs committing into one
destination at once (`concurrent.py`), a live claim holder raced by another job or a cleanup and
two takers of a dead one (`races.py`), damaged records and links to elsewhere (`damage.py`),
markers and records forged to name committed files (`forged.py`); and
the crash points again on a destination that already holds a committed data set, in each write
mode (`existing.py`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .ambiguous import ambiguous_points, run_ambiguous_point
from .crash_report import CrashReport
from .existing import existing_crash_points
from .guarantees import SCHEDULES as GUARANTEES
from .harness import ScenarioStores, deterministic_options, load_preload
from .race_parties import SCHEDULES as RACES
from .scenario import Select, baseline, crash_points, run_crash_point, run_scenarios

__all__ = ["RACE_SCHEDULES", "CrashReport", "race_schedules", "verify_crash"]

log = logging.getLogger(__name__)

RACE_SCHEDULES = (*RACES, *GUARANTEES, "damaged_record", "links")


def race_schedules(races: bool | Collection[str]) -> tuple[str, ...]:
    """The race schedules asked for: all (True), none (False) or those named (ConfigError
    naming an unknown one)."""
    if isinstance(races, bool):
        return RACE_SCHEDULES if races else ()
    from ..errors import ConfigError

    unknown = sorted(set(races) - set(RACE_SCHEDULES))
    if unknown:
        raise ConfigError(
            f"unknown race schedule {unknown[0]!r}; known: {', '.join(RACE_SCHEDULES)}"
        )
    return tuple(s for s in RACE_SCHEDULES if s in set(races))


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
    races: bool | Collection[str] = False,
    ambiguous: bool = True,
    select: Select | None = None,
    preload: tuple[str, ...] = (),
    forged_markers: bool = False,
    rollback: Collection[str] = (),
    keep_going: bool = False,
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
        over data (see `concurrent.py`); where appends go without the claim, two recorded
        drivers appending, the first dying or losing its answer at its transaction
        (`concurrent_appends.py`).
    races: the schedules of `races.py` and `damage.py`: a live claim holder (a child driver,
        stopped mid-commit) raced by a job with the holder's clock skewed by -/+300 s, by a job
        with `claim_timeout_s=0.2` (and, both at 0.2 s, one stopped past its lease), or by
        `cleanup --older-than 0`; two takers of a dead claim
        at once; damaged claim and intent records; links to a directory outside the
        destination; and one schedule per guarantee (`guarantees.py`). True: all of them; a collection: those named (`RACE_SCHEDULES`). The
        command line turns them all on with `--concurrent-jobs` (`--no-races` does not).
    existing_data: every crash point again, for a job in each write mode into a destination
        that holds a committed data set (3x the crash points).
    ambiguous: run the ambiguous answers (on by default: they are part of the crash points).
    select: only crash points and ambiguous answers at the operations it accepts (a quick,
        targeted run; the crash-free baseline always runs).
    forged_markers: markers naming a committed job's data files forged into a made-up job's
        directory, one sharing its tag and its own, then `cleanup` or the next job; and into
        a live job's own directory as it commits; and forged records (a made-up job's intent
        record, a committed job's directory whose records name another job), for a committer
        with markers (see `forged.py`).
    preload: modules (`module` or `module:function`, the function then called) imported first,
        here, in worker processes and in child drivers: how a committer outside the built-in
        registry (a test's deliberately broken one, a user's own) adds its registry row.
    rollback: crash points on these sides of their operation ("before", "after") are
        recovered as `dataferry cleanup --rollback` recovers a dead job (a decided Hive load
        undone from its journal), not by the driver's abort (which finishes a decided commit).
    keep_going: a family of scenarios that fails for a reason outside any scenario (a
        server that stops answering) is recorded in `CrashReport.errors` and the next family
        runs (the command line: hours of a slow server's results are not lost to one timeout);
        without it the error is raised.
    """
    from .concurrent import run_concurrent
    from .concurrent_appends import run_concurrent_appends
    from .damage import run_damage
    from .driver_kills import run_driver_kills
    from .forged import run_forged
    from .guarantees import run_guarantees
    from .races import run_races
    from .tables import read_as
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

    with read_as(committer, options):  # a table committer's destinations: read as its tables
        try:
            base, trace = baseline(committer, stores, options)
            points = crash_points(trace, every=every, limit=limit, select=select)
            jobs = [
                (committer, stores.url(f"k{t.index}{w[0]}"), t.index, w, options, w in rollback)
                for t, w in points
            ]
            tick = part()
            answers = (
                ambiguous_points(trace, every=max(1, every), limit=limit, select=select)
                if ambiguous
                else []
            )
            names = [f"a{p.index}{p.when[0]}{'d' if p.decoy else ''}" for p in answers]
            answer_jobs = [
                (committer, stores.url(n), p, options) for n, p in zip(names, answers, strict=True)
            ]
            # a sample small enough for the processes (a test's) runs both kinds at once
            beside = len(jobs) > 1 and len(answer_jobs) > 1
            beside = beside and len(jobs) + len(answer_jobs) <= processes
            with ThreadPoolExecutor(1) as side:
                later = (
                    side.submit(
                        run_scenarios,
                        run_ambiguous_point,
                        answer_jobs,
                        len(answer_jobs),
                        preload,
                        part(),
                    )
                    if beside
                    else None
                )
                crash_processes = len(jobs) if beside else processes
                scenarios = run_scenarios(run_crash_point, jobs, crash_processes, preload, tick)
                found = later.result() if later is not None else None
            for s, (t, _w) in zip(scenarios, points, strict=True):
                s.op, s.path = t.op.value, t.path
            report = CrashReport(
                committer, store or "local", len(trace), [base, *scenarios], seed=seed
            )
            if ambiguous:
                report.extra += (
                    found
                    if found is not None
                    else run_scenarios(run_ambiguous_point, answer_jobs, processes, preload, part())
                )
            workers = max(processes, min(2, os.cpu_count() or 1))
            private = f"{stores.base} is private to one process: "

            def run(name: str, family: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
                """One more scenario family on this committer and store, counted as a part;
                with `keep_going`, one that fails is recorded and gives nothing."""
                try:
                    return family(
                        committer, stores, options, *args, seed=seed, progress=part(), **kwargs
                    )
                except Exception as e:
                    if not keep_going:
                        raise
                    report.errors[name] = f"{type(e).__name__}: {e}"
                    log.warning("verify crash: %s did not finish: %s", name, e, exc_info=True)
                    return ([], {}) if name in ("guarantees", "damage", "forged") else []

            if driver_kills > 0 and not stores.shared_between_processes:
                report.skipped["driver_kill"] = (
                    private + "a killed child driver's destination would vanish with it"
                )
            elif driver_kills > 0:
                report.extra += run(
                    "driver_kills",
                    run_driver_kills,
                    driver_kills,
                    timeout_s=kill_timeout_s,
                    workers=workers,
                    preload=preload,
                )
            if zombies:
                report.extra += run("zombies", run_zombies, max_points=zombie_points)
            if concurrent_jobs:
                report.extra += run("concurrent", run_concurrent, points=concurrent_points)
                report.extra += run(
                    "concurrent_appends", run_concurrent_appends, points=concurrent_points
                )
            schedules = race_schedules(races)
            if schedules and not stores.shared_between_processes:
                report.skipped["races"] = private + "a child driver cannot hold its claim"
            elif schedules:
                held = tuple(s for s in schedules if s in RACES)
                if held:
                    report.extra += run(
                        "races", run_races, schedules=held, preload=preload, workers=workers
                    )
                guarded = tuple(s for s in schedules if s in GUARANTEES)
                if guarded:
                    found, skipped = run(
                        "guarantees",
                        run_guarantees,
                        schedules=guarded,
                        preload=preload,
                        workers=workers,
                    )
                    report.extra += found
                    report.skipped.update(skipped)
                damaged = tuple(s for s in schedules if s not in (*RACES, *GUARANTEES))
                if damaged:
                    found, skipped = run(
                        "damage", run_damage, kinds=damaged, preload=preload, workers=workers
                    )
                    report.extra += found
                    report.skipped.update(skipped)
            if forged_markers:
                found, skipped = run("forged", run_forged)
                report.extra += found
                report.skipped.update(skipped)
            if existing_data:
                report.extra += run(
                    "existing_data",
                    existing_crash_points,
                    every=every,
                    limit=limit,
                    processes=processes,
                    select=select,
                    preload=preload,
                )
            return report
        finally:
            stores.close()
