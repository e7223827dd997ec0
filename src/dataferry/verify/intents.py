"""Damaged intent records: a decided commit whose record is there but cannot be read.

What it models: a disk, a hand or a half-finished copy that damaged a job's intent record after
its commit was decided, and a driver that died there. The record is the only proof the commit
was decided: one that is there but cannot be read must never be taken for "no decision" (a
rollback of an `overwrite` that had already deleted the earlier data loses both data sets).

`damaged_intent`: a job over a committed data set, in `overwrite` and in `append`, is killed
(a driver in a child process, SIGKILL) at each phase of its decided commit (`decided`: just
after the record; `applying`: half way to `_SUCCESS`; `after_success`: in its cleanup); each
intent record it left is then damaged in one way (`INTENT_DAMAGE`): cut to half its bytes,
larger than the cap on a record's size (the cap lowered to `SMALL_CAP` in the cleanup's
process, the record padded past it), a directory in its place, or garbage bytes. Then
`cleanup --older-than 0` runs: either it finishes the commit (all of it visible, `_SUCCESS`),
or it says it cannot, naming why, and every file of the job is still on the store
(`no_data_loss`); a cleanup that rolls the job back has taken the damage for "no decision".
A table job (`tables.is_table`) is also killed just after its transaction (`landed`); its
decision is the transaction, which the table itself says is there or not, so a damaged
record may be settled from the table: a rollback of a job whose transaction is not in the
table is its design, and the checks of its outcome (all there once, or nothing of it, the
earlier table kept) judge it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection
from typing import Any

from . import invariants as inv
from .child import ChildSpec, carry, run_child
from .damage import job_files_anywhere
from .earlier import write_earlier
from .harness import (
    EXISTING,
    Scenario,
    ScenarioStores,
    check_outcome,
    discard,
    leftovers_allowed,
    quiet_store,
    seeded_uuid,
)
from .races import points_of
from .scenario import run_threads
from .tables import is_table

CHILD_TIMEOUT_S = 30.0
INTENT_DAMAGE = ("truncated", "oversized", "directory", "garbage")
INTENT_POINTS = ("decided", "applying", "landed", "after_success")
INTENT_MODES = ("overwrite", "append")
SMALL_CAP = 1 << 20  # the cap on an intent record's size in the cleanup of `oversized`
GARBAGE = bytes(range(256)) * 4  # not UTF-8, not JSON


def lower_intent_cap() -> None:
    """A preload for the cleanup's process: an intent record's cap is `SMALL_CAP`, so an
    oversized record is 1 MiB, not 1 GiB."""
    from ..commit.records import intent

    intent.INTENT_MAX_BYTES = SMALL_CAP


def damage_intent(store: Any, path: str, how: str) -> None:
    """Damage the intent record at `path` in one way of `INTENT_DAMAGE`."""
    raw = store.read_bytes(path)
    if how == "truncated":
        store.write_bytes(path, raw[: len(raw) // 2])
    elif how == "oversized":  # still a valid record, only too large to be read
        store.write_bytes(path, raw + b" " * (SMALL_CAP + 1 - len(raw)))
    elif how == "directory":
        store.delete(path)
        store.write_bytes(f"{path}/inside", raw)
    elif how == "garbage":
        store.write_bytes(path, GARBAGE)
    else:
        raise ValueError(how)


def damaged_intent(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    preload: tuple[str, ...],
    mode: str,
    point: str,
    index: int,
    uuids: tuple[str, str],
    how: str,
    kind: str = "damaged_intent",
) -> Scenario:
    """The job (`uuids`: the earlier data set's, the job's) killed before operation `index`
    (its `point`), its intent records damaged `how`, then a cleanup (see the module docs)."""
    from ..commit.records.intent import INTENT_FILE

    earlier_uuid, job_uuid = uuids
    url = stores.url(f"di-{mode[:2]}-{point[:3]}-{how[:3]}")
    earlier = write_earlier(committer, url, options, earlier_uuid)
    spec = ChildSpec(committer, url, mode, options, job_uuid, kill_index=index, **carry(preload))
    status, _, _ = run_child(spec, CHILD_TIMEOUT_S)
    plain = quiet_store(url)
    cut = []
    for st in plain.walk(""):
        if st.path.endswith(INTENT_FILE):
            damage_intent(plain, st.path, how)
            cut.append(st.path)
    small = (*preload, f"{__name__}:lower_intent_cap") if how == "oversized" else preload
    cleanup = ChildSpec(committer, url, "append", options, "", action="cleanup", **carry(small))
    c_status, c_detail, c_report = run_child(cleanup, CHILD_TIMEOUT_S)
    problems = named_end("cleanup", c_status, c_detail, c_report)
    mine = inv.files_of_job(plain, job_uuid)
    if c_status == "done":  # cleanup says it finished or undid the job: check it all
        allow = leftovers_allowed(committer, url, mode, options)
        problems += check_outcome(plain, job_uuid, mode, earlier, "killed", allow)
        if cut and not mine and not is_table(committer):
            problems.append(
                f"{inv.NO_LOSS}: cleanup rolled back a decided commit whose intent record is "
                f"damaged ({how}), as if nothing had been decided"
                + (": neither data set is there" if inv.check_kept(plain, earlier) else "")
            )
    elif not mine and not job_files_anywhere(plain, job_uuid):
        problems.append(
            f"{inv.NO_LOSS}: cleanup could not finish the decided commit ({c_detail[:160]}) "
            "and the job's files are no longer all on the store"
        )
    if mode == "append":
        problems += inv.check_kept(plain, earlier)
    scenario = Scenario(
        index=index,
        when="before",
        kind=kind,
        mode=mode,
        destination=EXISTING,
        outcome=f"holder {status}, cleanup {c_status}",
        schedule=f"intent_{how}: killed at {point} (op {index}), {len(cut)} record(s) "
        + {
            "truncated": "cut to half",
            "oversized": f"padded past {SMALL_CAP} bytes",
            "directory": "made directories",
            "garbage": "overwritten with garbage",
        }[how]
        + (f"; cleanup: {c_detail[:160]}" if c_detail else ""),
        problems=problems,
    )
    discard(plain)
    return scenario


def named_end(what: str, status: str, detail: str, report: dict[str, Any]) -> list[str]:
    """named_error for a child's job or cleanup: it ended, and with the library's error."""
    if status in ("timeout", "child_error"):
        return [f"{inv.NAMED}: {what} {status}: {detail[:200]}"]
    unnamed = report.get("unnamed") or ""
    if unnamed:
        return [f"{inv.NAMED}: {what} failed with {unnamed} ({detail[:200]})"]
    return []


def baseline(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    preload: tuple[str, ...],
    mode: str,
    uuids: tuple[str, str],
) -> tuple[Scenario, dict[str, int]]:
    """The job alone over the earlier data, traced: where its phases are."""
    url = stores.url(f"di-{mode[:2]}-base")
    write_earlier(committer, url, options, uuids[0])
    spec = ChildSpec(committer, url, mode, options, uuids[1], trace=True, **carry(preload))
    status, detail, report = run_child(spec, CHILD_TIMEOUT_S)
    discard(quiet_store(url))
    trace = report.get("trace") or []
    points, _ = points_of(trace, report.get("commit_end") or 0)
    landed = [t[0] for t in trace if t[1] == "table_commit"]
    if landed and landed[-1] + 1 < (report.get("commit_end") or 0):
        points["landed"] = landed[-1] + 1  # a table job: just after its transaction
    scenario = Scenario(
        index=None,
        when="none",
        kind="race_baseline",
        mode=mode,
        destination=EXISTING,
        outcome=status,
        schedule="damaged_intent: the job alone; points "
        + ", ".join(f"{k} op {i}" for k, i in points.items()),
    )
    if status != "committed":
        scenario.problems.append(
            f"{inv.WRITE_MODE}: the job alone, in mode {mode!r} over data, ended {status}: "
            f"{detail[:200]}"
        )
    return scenario, points


def run_damaged_intents(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    seed: int = 0,
    preload: tuple[str, ...] = (),
    workers: int = 2,
    progress: Callable[[int], None] | None = None,
    modes: Collection[str] = INTENT_MODES,
    points: Collection[str] = INTENT_POINTS,
    kinds: Collection[str] = INTENT_DAMAGE,
) -> list[Scenario]:
    """Each damage of `kinds` at each of `points` of a job in each of `modes` (baselines
    first, then the damaged runs, `workers` at a time)."""
    rng = random.Random(f"{seed}:intents")
    uuids = {m: (seeded_uuid(rng), seeded_uuid(rng)) for m in modes}
    found: dict[str, dict[str, int]] = {}

    def base(mode: str) -> Scenario:
        scenario, found[mode] = baseline(committer, stores, options, preload, mode, uuids[mode])
        return scenario

    def plan() -> list[Callable[[], Scenario]]:
        return [
            lambda m=m, p=p, i=i, h=h: damaged_intent(
                committer, stores, options, preload, m, p, i, uuids[m], h
            )
            for m in modes
            for p, i in found.get(m, {}).items()
            if p in points
            for h in kinds
        ]

    return run_threads([lambda m=m: base(m) for m in modes], workers, "intent", progress, then=plan)
