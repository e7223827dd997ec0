"""A table commit answered with an error after it landed (table committers only).

What it models: a table format's commit (a Delta log entry, an Iceberg metadata swap, a Hudi
instant) that reached the table, whose answer then says it failed: the format's own conflict
error (as if another writer had taken the version first), a timeout of unknown outcome, or a
plain I/O error. Tried again without asking the table first, the job's transaction would be in
the table twice (every row duplicated, which the referee's view of the table sees as files no
attempt wrote).

`table_landed`: for each answer, the reference job on a fresh destination in mode `error` and
over a committed table in `append` and `overwrite`, through a store whose first table commit
lands and then answers (`FaultRule`, `when="after"`, `Op.TABLE_COMMIT`); a job that fails is
recovered as its driver would (`abort_job`, `cleanup_job`). The job is then all there once, or
not at all, as its mode says (`check_outcome`). The conflict answer is the error the
committer's table format takes for one (`TableFormat.is_conflict`), found among
`CONFLICT_ERRORS`; a format with none (its commit is a create-if-absent) answers it with the
plain error.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable, Collection
from typing import Any

from ..errors import InjectedCrash
from ..store import FaultRule, Op, open_store
from ..store import fault_layer as find_fault_layer
from .earlier import earlier_data
from .harness import (
    EXISTING,
    FRESH,
    Scenario,
    ScenarioStores,
    check_outcome,
    discard,
    job_committer,
    leftovers_allowed,
    quiet_store,
    run_reference,
    seeded_uuid,
)
from .scenario import recover_job, run_threads

ANSWERS = ("conflict", "timeout", "error")
LANDED_VARIANTS = ((FRESH, "error"), (EXISTING, "append"), (EXISTING, "overwrite"))
# the errors the table commits raise for a commit another writer's made invalid (Delta's is
# dataferry's own: it writes the commit file itself)
CONFLICT_ERRORS = (
    "dataferry.commit.table.delta.entry:VersionTaken",
    "pyiceberg.exceptions:CommitFailedException",
)


def conflict_error(committer: str, url: str, options: dict[str, Any]) -> BaseException | None:
    """An error the committer's table format takes for a conflict (`is_conflict`), or None
    (a format without conflicts, or a committer without a format)."""
    under_test = job_committer(committer, quiet_store(url), "append", options)
    table_format = getattr(under_test, "format", None)
    if table_format is None:
        return None
    is_conflict = table_format.is_conflict
    for entry in CONFLICT_ERRORS:
        module, _, name = entry.partition(":")
        try:
            error = getattr(importlib.import_module(module), name)(
                "injected: another writer committed this version first"
            )
        except (ImportError, AttributeError):
            continue
        if is_conflict(error):
            return error
    return None


def answered_after(answer: str, conflict: BaseException | None) -> FaultRule:
    """The first table commit lands, then its caller is told `answer`."""
    kinds = frozenset({Op.TABLE_COMMIT})
    if answer == "timeout":
        return FaultRule(action="ambiguous", when="after", kinds=kinds)
    if answer == "error" or conflict is None:
        return FaultRule(action="fail", when="after", kinds=kinds)

    def lost_race(*_: object) -> None:
        raise conflict

    return FaultRule(action="callback", when="after", kinds=kinds, callback=lost_race)


def table_landed(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    destination: str,
    mode: str,
    answer: str,
    uuids: tuple[str, str],
) -> Scenario:
    """One run (see the module docstring); `uuids`: the earlier data set's and the job's."""
    url = stores.url(f"tl-{answer[:3]}-{destination[0]}{mode[:2]}")
    earlier = earlier_data(committer, url, options, destination, uuids[0])
    conflict = conflict_error(committer, url, options) if answer == "conflict" else None
    rule = answered_after(answer, conflict)
    store = open_store(url, faults=[rule], latency_scale=0.0)
    problems: list[str] = []
    try:
        out = run_reference(committer, store, mode, options, uuids[1])
        status, error, job_id = out.status, out.error, out.job_id
    except InjectedCrash as e:  # (a fault rule of this schedule never crashes)
        status, error, job_id = "crashed", str(e), e.outcome.job_id  # type: ignore[attr-defined]
    fault = find_fault_layer(store)
    if fault is not None:
        fault.armed = False
    if status not in ("committed", "refused"):
        failed = job_committer(committer, store, mode, options).new_job(job_id)
        recover_job(committer, store, failed, options, problems)
    plain = quiet_store(url)
    allow = leftovers_allowed(committer, url, mode, options)
    problems += check_outcome(plain, uuids[1], mode, earlier, status, allow)
    how = (
        f"the format's conflict ({type(conflict).__name__})"
        if conflict is not None
        else ("a timeout" if answer == "timeout" else "an I/O error")
    )
    scenario = Scenario(
        index=None,
        when="after",
        kind="table_landed",
        mode=mode,
        destination=destination,
        op=Op.TABLE_COMMIT.value,
        outcome=status,
        schedule=f"the table commit landed, then answered with {how}"
        + ("" if rule.fired else " (never reached)")
        + (f"; {error[:160]}" if error else ""),
        problems=problems,
    )
    discard(plain)
    return scenario


def run_table_landed(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
    answers: Collection[str] = ANSWERS,
    variants: Collection[tuple[str, str]] = LANDED_VARIANTS,
) -> list[Scenario]:
    """Each answer of `answers` on each variant of `variants`, `workers` at a time."""
    rng = random.Random(f"{seed}:landed")
    uuids = {v: (seeded_uuid(rng), seeded_uuid(rng)) for v in variants}
    runs = [
        lambda d=d, m=m, a=a: table_landed(committer, stores, options, d, m, a, uuids[(d, m)])
        for d, m in variants
        for a in answers
    ]
    from .tables import active, read_as

    if active() is not None:  # (verify_crash reads its destinations as tables already)
        return run_threads(runs, workers, "landed", progress)
    with read_as(committer, options):
        return run_threads(runs, workers, "landed", progress)
