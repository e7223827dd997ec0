"""Zombie attempts: a task attempt the driver gave up on goes on writing and commits anyway.

What it models: attempt 0 of a task is cut off from the driver (a network partition, a long GC
pause, an executor the cluster manager declared lost), so the driver runs the task again as
attempt 1, which commits, and the driver commits the job with attempt 1's commit message. But
attempt 0 still reaches the store: it writes its remaining files and runs its own task commit,
as the seed's T1A1 that "can still rename files" does. A committer is correct if the committed
output still holds exactly one attempt's files per task, and nothing a reader sees changes once
`_SUCCESS` is there.

Schedules, each on a fresh destination and on one already holding data in each write mode:
- `before_job_commit`: the zombie commits after the replacement's task commit, before job commit;
- `in_job_commit`: the zombie commits at one store operation of the job commit (every one in
  turn), from a `callback` fault on the driver's store;
- `after_success`: the zombie commits after the job commit returned (`_SUCCESS` written).

The zombie has its own store object (it is another process), writes its first file before the
replacement starts and the rest just before its commit; its task commit may be refused (errors
are swallowed: refusing is a correct answer). After the zombie, `dataferry cleanup` runs (older
than 0) and the destination is checked: visible output unchanged since the job commit, output
exclusive and complete per the write mode, no leftovers.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..commit.lookup import committer_for
from ..commit.protocol import TaskAttemptContext
from ..engine.attempt import TaskOutput
from ..errors import DataferryError
from ..store import fault_layer as find_fault_layer
from ..store import open_store
from ..store.faults import call_at
from . import invariants as inv
from .earlier import earlier_data
from .harness import (
    VARIANTS,
    PreparedJob,
    Scenario,
    ScenarioStores,
    Variant,
    allowed_leftovers,
    check_outcome,
    discard,
    leftovers_allowed,
    prepare_job,
    quiet_store,
    seeded_uuid,
    spread,
    status_of,
    variant_scenario,
)
from .reference import FILES_PER_TASK, attempt_of, unique_work

ZOMBIE_TASK = 1  # the seed's T1: attempt 0 is the zombie, attempt 1 the replacement
BEFORE, DURING, AFTER = "before_job_commit", "in_job_commit", "after_success"


class Zombie:
    """Attempt 0 of ZOMBIE_TASK, on a store of its own: starts early, commits late."""

    def __init__(self, url: str, job: Any) -> None:
        store = quiet_store(url)
        job = replace(job, store=store)
        self.ctx = TaskAttemptContext(job, job.job_id.task(ZOMBIE_TASK).attempt(0))
        self.committer = committer_for(self.ctx)
        self.out = TaskOutput(self.committer, self.ctx)
        self.result = "never ran"

    def start(self) -> None:
        """Set up and write the first file (then the driver loses sight of it)."""
        try:
            self.committer.setup_task(self.ctx)
            unique_work(ZOMBIE_TASK, self.out, range(0, 1))
            self.result = "started"
        except Exception as e:  # a committer may refuse it from the start
            self.result = f"refused at setup:{type(e).__name__}"

    def finish(self, *_: Any) -> None:
        """Write the remaining files and commit; once only (also a FaultRule callback)."""
        if self.result != "started":
            return
        self.result = "running"
        try:
            unique_work(ZOMBIE_TASK, self.out, range(1, FILES_PER_TASK))
            self.committer.commit_task(self.ctx, tuple(self.out.written))
            self.result = "committed"
        except Exception as e:
            self.result = f"refused:{type(e).__name__}"


def _run(
    committer: str,
    url: str,
    options: dict[str, Any],
    v: Variant,
    where: str | None,
    index: int | None = None,
) -> tuple[Scenario, PreparedJob | None]:
    """One schedule (`where` None: the zombie never commits; the baseline that finds the job
    commit's span)."""
    earlier = earlier_data(committer, url, options, v.destination, v.earlier_uuid)
    holder: dict[str, Zombie] = {}
    rules = [] if index is None else [call_at(index, lambda *a: holder["z"].finish(*a))]
    store = open_store(url, faults=rules, latency_scale=0.0)
    fault = find_fault_layer(store)
    assert fault is not None
    scenario = variant_scenario(
        v,
        "zombie",
        index=index,
        when="before" if index is not None else "",
        schedule=where or "none",
    )
    plain = quiet_store(url)
    try:
        job = prepare_job(committer, store, v.mode, options, v.job_uuid, attempts={ZOMBIE_TASK: 1})
    except DataferryError as e:  # refused (or failed) before any task ran
        scenario.outcome = status_of(e)
        allow = leftovers_allowed(committer, url, v.mode, options)
        scenario.problems += check_outcome(
            plain, v.job_uuid, v.mode, earlier, scenario.outcome, allow
        )
        return scenario, None
    zombie = holder["z"] = Zombie(url, job.job)
    zombie.start()
    in_place = bool(getattr(job.committer, "writes_in_place", False))
    allow = allowed_leftovers(job.committer)
    if where == BEFORE:
        zombie.finish()
        seen = inv.files_of_job(plain, v.job_uuid, inv.reader_view(plain, in_place))
        if seen:
            scenario.problems.append(
                f"{inv.NOTHING_VISIBLE}: {len(seen)} files of the job visible before job "
                f"commit, e.g. {seen[0]}"
            )
    start = fault.op_count
    job.commit()
    fault.armed = False
    if where is None:  # the baseline: where the job commit lies in the driver's trace
        v.start, v.end = start, fault.op_count
    if index is not None and index < len(fault.trace):
        scenario.op, scenario.path = fault.trace[index].op.value, fault.trace[index].path
    scenario.outcome = job.status
    if where == DURING and zombie.result == "started":
        scenario.schedule += " (op not reached: zombie ran after)"
    at_commit = inv.snapshot(plain)
    seen_at_commit = inv.reader_view(plain, in_place)
    if where is not None:
        zombie.finish()  # after_success, or a during-commit op the commit never reached
    scenario.outcome += f", zombie {zombie.result}"
    if job.status == "committed":
        changed = inv.diff(seen_at_commit, inv.reader_view(plain, in_place))
        if changed:
            scenario.problems.append(
                f"{inv.STABLE}: after the zombie's commit a reader sees {changed}"
            )
    from ..commit.job.cleanup import cleanup_destination

    try:
        report = cleanup_destination(plain, older_than_s=0.0)
        scenario.problems += _orphans_not_the_zombies(report.uploads_aborted, where)
    except (DataferryError, OSError) as e:
        scenario.problems.append(f"{inv.NO_LEFTOVERS}: dataferry cleanup failed: {e}")
    if job.status == "committed":
        # in place (direct), readers of committed data see `list_committed`: that must not
        # change, and once cleanup has run, plain readers must see nothing more than that
        after = inv.reader_view(plain, in_place)
        changed = inv.diff(seen_at_commit if in_place else at_commit, after)
        if changed:
            scenario.problems.append(f"{inv.STABLE}: after dataferry cleanup: {changed}")
        junk = sorted(set(inv.snapshot(plain)) - set(after)) if in_place else []
        if junk:
            scenario.problems.append(
                f"{inv.STABLE}: after dataferry cleanup plain readers still see {len(junk)} "
                f"files no commit lists, e.g. {junk[0]}"
            )
    scenario.problems += check_outcome(plain, v.job_uuid, v.mode, earlier, job.status, allow)
    return scenario, job


def _orphans_not_the_zombies(keys: list[str], where: str | None) -> list[str]:
    """Cleanup aborts uploads that no job names any more. Only the zombie can leave those,
    and only by uploading after its job stopped looking: a job must abort by itself the uploads
    of an attempt that committed before the job's commit, and all of its own."""
    if where in (None, BEFORE) and keys:
        return [
            f"{inv.NO_LEFTOVERS}: the job left {len(keys)} uploads pending that only "
            f"cleanup's purge of orphans removed, e.g. {keys[0]}"
        ]
    foreign = [k for k in keys if attempt_of(k) != (ZOMBIE_TASK, 0)]
    if foreign:
        return [
            f"{inv.NO_LEFTOVERS}: uploads of attempts other than the zombie were left "
            f"pending for cleanup's purge, e.g. {foreign[0]}"
        ]
    return []


def run_zombies(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    max_points: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Scenario]:
    """Every schedule for every variant: before the job commit, at each store operation of it
    (or `max_points` of them, spread), after it. The baselines are not reported."""
    rng = random.Random(f"{seed}:zombies")
    variants = [Variant(dest, mode, seeded_uuid(rng), seeded_uuid(rng)) for dest, mode in VARIANTS]
    runs: list[tuple[Variant, str, int | None]] = []
    for v in variants:
        url = stores.url(f"z-{v.destination[0]}{v.mode}-base")
        scenario, job = _run(committer, url, options, v, None)
        discard(quiet_store(url))
        if job is None:  # refused before the job ran: one scenario says it all
            runs.append((v, BEFORE, None))
            continue
        during = spread(list(range(v.start, v.end)), max_points or (v.end - v.start), rng)
        runs += [(v, BEFORE, None), *((v, DURING, i) for i in during), (v, AFTER, None)]
    out = []
    for v, where, index in runs:
        url = stores.url(f"z-{v.destination[0]}{v.mode}-{where[0]}{index or ''}")
        scenario, _ = _run(committer, url, options, v, where, index)
        if index is not None:
            scenario.schedule += f" op {index - v.start} of {v.end - v.start}"
        discard(quiet_store(url))
        out.append(scenario)
        if progress:
            progress(len(runs))
    return out
