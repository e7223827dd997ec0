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

The child knows the committers of the built-in registry; `preload` names modules it imports
first (`module` or `module:function`, see `harness.load_preload`), with this process's import
path, so a committer registered at run time (a test's deliberately broken one) runs there too.

Variants: a fresh destination (the job in mode `error`), and one already holding a committed
data set with the job in each write mode. Each variant's job commit is located in a kill-free
baseline run of the same job in a child of its own (same job ids, same interpreter settings, so
the same store operations in the same order); the baseline is checked as a scenario too.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import DataferryError
from ..store import open_store
from ..store.faults import kill_at
from .harness import (
    EXISTING,
    FRESH,
    MODES,
    Scenario,
    ScenarioStores,
    Variant,
    allowed_leftovers,
    check_outcome,
    check_rerun,
    discard,
    load_preload,
    quiet_store,
    recovery_committer,
    run_reference,
    seeded_uuid,
    spread,
    write_earlier,
)
from .invariants import NO_LEFTOVERS

CHILD_CODE = (
    "import sys; from dataferry.verify.driver_kills import child_main; "
    "sys.exit(child_main(sys.argv[1]))"
)
VARIANTS = ((FRESH, "error"), *((EXISTING, m) for m in MODES))


@dataclass(frozen=True)
class KillSpec:
    """One driver run in a child: the job, its destination, and where to kill it."""

    committer: str
    url: str
    mode: str
    options: dict[str, Any]
    job_uuid: str
    index: int | None = None  # None: run to the end (the child is not killed)
    when: str = "before"
    preload: tuple[str, ...] = ()  # imported first (module or module:function)
    import_path: tuple[str, ...] = ()  # put before the child's sys.path (the parent's)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


def child_main(spec_json: str) -> int:
    """The child driver: run the job with the kill armed; if it survives, print how the job
    ended and which store operations its job commit spanned."""
    spec = KillSpec(**json.loads(spec_json))
    if spec.preload:
        sys.path[:0] = [p for p in spec.import_path if p not in sys.path]
        load_preload(spec.preload)
    rules = [] if spec.index is None else [kill_at(spec.index, spec.when)]  # type: ignore[arg-type]
    store = open_store(spec.url, faults=rules, latency_scale=0.0)
    out = run_reference(spec.committer, store, spec.mode, spec.options, spec.job_uuid)
    report = {
        "status": out.status,
        "error": out.error,
        "commit_start": out.commit_start,
        "commit_end": out.commit_end,
    }
    print(json.dumps(report), flush=True)
    return 0


def run_child(spec: KillSpec, timeout_s: float) -> tuple[str, str, dict[str, Any]]:
    """Run one child driver; (outcome, detail, its report): `killed`, `timeout`, `child_error`,
    or the status of a job the kill never reached (committed, refused, failed:...)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD_CODE, spec.to_json()],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    except subprocess.TimeoutExpired:
        return "timeout", f"the child driver did not finish in {timeout_s:g} s", {}
    if proc.returncode == -9:
        return "killed", "", {}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return "child_error", f"exit {proc.returncode}: {tail[0]}", {}
    data = json.loads(lines[-1])
    return data["status"], data["error"], data


def _earlier(committer: str, url: str, options: dict[str, Any], v: Variant) -> dict[str, bytes]:
    if v.destination != EXISTING:
        return {}
    return write_earlier(committer, url, options, v.earlier_uuid)


def _carry(preload: tuple[str, ...]) -> dict[str, Any]:
    """KillSpec fields that give a child the preloads and this process's import path."""
    if not preload:
        return {}
    return {"preload": tuple(preload), "import_path": tuple(p for p in sys.path if p)}


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
    earlier = _earlier(committer, url, options, v)
    outcome, detail, report = run_child(
        KillSpec(committer, url, v.mode, options, v.job_uuid, **_carry(preload)), timeout_s
    )
    end = report.get("commit_end") or 0
    start = report.get("commit_start")
    v.start, v.end = (end if start is None else start), end
    plain = quiet_store(url)
    allow = allowed_leftovers(recovery_committer(committer, plain, v.mode, options))
    scenario = Scenario(
        index=None,
        when="none",
        kind="driver_kill",
        mode=v.mode,
        destination=v.destination,
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
    from ..commit.cleanup import cleanup_destination

    url = stores.url(f"dk-{v.destination[0]}{v.mode}-{index}{when[0]}")
    earlier = _earlier(committer, url, options, v)
    spec = KillSpec(committer, url, v.mode, options, v.job_uuid, index, when, **_carry(preload))
    outcome, detail, _ = run_child(spec, timeout_s)
    scenario = Scenario(
        index=index,
        when=when,
        kind="driver_kill",
        mode=v.mode,
        destination=v.destination,
        outcome=outcome,
        schedule=f"op {index - v.start} of {v.end - v.start} in job commit"
        + (f"; {detail}" if detail else ""),
    )
    plain = quiet_store(url)
    allow = allowed_leftovers(recovery_committer(committer, plain, v.mode, options))
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
    lock = threading.Lock()
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="dataferry-kill") as pool:
        out = list(
            pool.map(
                lambda v: _baseline(committer, stores, options, v, timeout_s, preload), variants
            )
        )
        runs = [(v, i, w) for v in variants for i, w in kill_points(v.start, v.end, n, rng)]
        total = len(runs) + len(variants)
        if progress:
            for _ in variants:
                progress(total)

        def one(run: tuple[Variant, int, str]) -> Scenario:
            s = _kill_scenario(
                committer, stores, options, *run, timeout_s=timeout_s, preload=preload
            )
            if progress:
                with lock:
                    progress(total)
            return s

        out += list(pool.map(one, runs))
    return out
