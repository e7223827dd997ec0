"""Dead drivers: the job's driver process is killed (SIGKILL) in the middle of its job commit.

What it models: the machine or container running the driver dies, the OOM killer takes it, or
an operator kills it, half way through making the output visible. No `finally` block, abort or
heartbeat runs; whatever the commit had done to the store is all there is. Later a user runs
`dataferry cleanup DEST --older-than 0`, and then runs the job again.

For each of N kill points spread over the job commit's store operations (seeded, reproducible),
the reference job runs with its driver in a fresh interpreter (`sys.executable -c`) that opens
the same destination with a `kill` fault at that operation. Once the child is dead the parent
recovers as a user would (`cleanup_destination(store, older_than_s=0)`) and checks that the
destination holds either the job's complete output with `_SUCCESS` or nothing of it (no file,
no empty directory, no leftovers), earlier data untouched unless the job completed, and that a
new job in mode `error` then commits (fresh destination) or is refused (one holding data).

The child is `child.py`'s driver (it knows the built-in registry and imports `preload` first,
so a committer registered at run time, a test's deliberately broken one, runs there too).

Variants: a fresh destination (the job in mode `error`), and one already holding a committed
data set with the job in each write mode. Each variant's job commit is located in a kill-free
baseline run of the same job in a child of its own (same job ids, same interpreter settings, so
the same store operations in the same order); the baseline is checked as a scenario too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from ..errors import DataferryError
from .child import ChildSpec, carry, run_child
from .earlier import earlier_data
from .harness import (
    VARIANTS,
    Scenario,
    ScenarioStores,
    Variant,
    check_outcome,
    check_rerun,
    discard,
    leftovers_allowed,
    quiet_store,
    seeded_uuid,
    spread,
    variant_scenario,
)
from .invariants import NO_LEFTOVERS
from .scenario import run_threads


def _baseline(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    v: Variant,
    timeout_s: float,
    preload: tuple[str, ...] = (),
) -> Scenario:
    """The variant's job with no kill, in a child driver: where its job commit lies in the
    trace, and (as a scenario) whether it ends as its mode says."""
    url = stores.url(f"dk-{v.destination[0]}{v.mode}-base")
    earlier = earlier_data(committer, url, options, v.destination, v.earlier_uuid)
    outcome, detail, report = run_child(
        ChildSpec(committer, url, v.mode, options, v.job_uuid, **carry(preload)), timeout_s
    )
    end = report.get("commit_end") or 0
    start = report.get("commit_start")
    v.start, v.end = (end if start is None else start), end
    plain = quiet_store(url)
    allow = leftovers_allowed(committer, url, v.mode, options)
    scenario = variant_scenario(
        v,
        "driver_kill",
        outcome=outcome,
        schedule=f"no kill; job commit is ops {v.start}..{v.end - 1}"
        + (f"; {detail}" if detail else ""),
    )
    scenario.problems += check_outcome(plain, v.job_uuid, v.mode, earlier, outcome, allow)
    discard(plain)
    return scenario


def _kill_scenario(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    v: Variant,
    index: int,
    when: str,
    timeout_s: float,
    preload: tuple[str, ...] = (),
) -> Scenario:
    from ..commit.job.cleanup import cleanup_destination

    url = stores.url(f"dk-{v.destination[0]}{v.mode}-{index}{when[0]}")
    earlier = earlier_data(committer, url, options, v.destination, v.earlier_uuid)
    spec = ChildSpec(
        committer,
        url,
        v.mode,
        options,
        v.job_uuid,
        kill_index=index,
        kill_when=when,
        **carry(preload),
    )
    outcome, detail, _ = run_child(spec, timeout_s)
    scenario = variant_scenario(
        v,
        "driver_kill",
        index=index,
        when=when,
        outcome=outcome,
        schedule=f"op {index - v.start} of {v.end - v.start} in job commit"
        + (f"; {detail}" if detail else ""),
    )
    plain = quiet_store(url)
    allow = leftovers_allowed(committer, url, v.mode, options)
    try:
        cleanup_destination(plain, older_than_s=0.0)
    except (DataferryError, OSError) as e:
        scenario.problems.append(f"{NO_LEFTOVERS}: dataferry cleanup failed: {e}")
    reported = "killed" if outcome in ("killed", "timeout", "child_error") else outcome
    scenario.problems += check_outcome(plain, v.job_uuid, v.mode, earlier, reported, allow)
    scenario.problems += check_rerun(committer, url, options, allow)
    discard(plain)
    return scenario


def kill_points(start: int, end: int, n: int, rng: random.Random) -> list[tuple[int, str]]:
    """`n` (index, before/after) points spread over the operations start..end-1."""
    points = [(i, w) for i in range(start, end) for w in ("before", "after")]
    return spread(points, n, rng)


def run_driver_kills(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    n: int,
    *,
    seed: int = 0,
    timeout_s: float = 60.0,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
    preload: tuple[str, ...] = (),
) -> list[Scenario]:
    """N kill points per variant (fresh destination; existing data in each write mode): the
    variants' baselines first, then every kill scenario, `workers` child drivers at a time.
    `preload`: modules each child imports first (see the module docstring)."""
    preload = tuple(preload)
    rng = random.Random(f"{seed}:driver_kills")
    variants = [Variant(dest, mode, seeded_uuid(rng), seeded_uuid(rng)) for dest, mode in VARIANTS]

    def baseline(v: Variant) -> Callable[[], Scenario]:
        return lambda: _baseline(committer, stores, options, v, timeout_s, preload)

    def kill(v: Variant, index: int, when: str) -> Callable[[], Scenario]:
        return lambda: _kill_scenario(
            committer, stores, options, v, index, when, timeout_s=timeout_s, preload=preload
        )

    def plan() -> list[Callable[[], Scenario]]:
        return [kill(v, i, w) for v in variants for i, w in kill_points(v.start, v.end, n, rng)]

    return run_threads([baseline(v) for v in variants], workers, "kill", progress, then=plan)
