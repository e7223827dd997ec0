"""Ambiguous answers: at every traced rename, copy, multipart completion, PUT, delete and table
commit (`Op.TABLE_COMMIT`, a table committer's one transaction), the
store answers AmbiguousOutcome (a timeout), once `before` the operation took effect and once
`after`; for a rename, copy or completion onto a data file, once more with another writer's
file of the same name appearing there as the answer comes (`run_decoy_scenario`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..commit.factory import make_committer
from ..errors import DataferryError
from ..ids import new_job_id
from ..store import Op, Store, open_store
from ..store import fault_layer as find_fault_layer
from ..store.faults import TracedOp, ambiguous_at
from . import invariants as inv
from .harness import Scenario, discard
from .harness import engine as _engine
from .reference import file_bytes, parse_file, reference_tasks
from .scenario import Select, recover_job, run_scenario

# what a store can answer "timed out, outcome unknown" to, with an effect to be unsure about
AMBIGUOUS_OPS = frozenset(
    {
        Op.RENAME,
        Op.COPY,
        Op.MULTIPART_COMPLETE,
        Op.WRITE,
        Op.CREATE_IF_ABSENT,
        Op.DELETE,
        # a table committer's transaction: the log entry or metadata swap that reports
        # failure although it landed (after), and the one lost on its way (before)
        Op.TABLE_COMMIT,
    }
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
    under_test = make_committer(committer, store, allow_unsafe_rename=True, **options)
    try:
        _engine().run_job(under_test, reference_tasks(), job_id=job_id)
        scenario.outcome = "committed"
    except DataferryError as e:
        scenario.outcome = f"job_failed:{type(e).__name__}"
    fault.armed = False
    committed = scenario.outcome == "committed"
    problems = scenario.problems
    problems += inv.check_success(store, committed)
    if inv.has_success(store):
        problems += inv.check_output(store)
    if committed:
        return scenario, store
    recover_job(
        committer, store, under_test.new_job(job_id), options, []
    )  # may stay for an operator
    if inv.has_success(store):
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


def run_ambiguous_point(args: tuple[str, str, AmbiguousPoint, dict[str, Any]]) -> Scenario:
    return run_ambiguous_scenario(*args)
