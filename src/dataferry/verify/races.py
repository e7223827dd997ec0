"""Live claim holders, and what races them: a second job, a `cleanup`, two takers at once.

What it models: the driver of a job that holds the destination's claim is alive but slow (a
long GC pause, a frozen VM, a loaded store), or its wall clock is wrong, while another job, a
scheduler's retry or a user's `dataferry cleanup DEST --older-than 0` decides it is dead. A
holder that is alive must never be overtaken; a holder that is really dead is taken over by
exactly one taker.

The holder is a real driver process (`sys.executable -c`, as the dead-driver scenarios run
it). At a chosen store operation of its job commit it stops itself (SIGSTOP: every thread of
it, the heartbeat too, as a frozen process). `RACE_AFTER_S` (0.5 s, longer than the short
claim timeout) later the parent acts; once its racer ended, or `PAUSE_S` (1 s) after it
started, it sends SIGCONT and the holder goes on as if nothing happened. The schedules:

- `skewed_clock`: the holder's wall clock (`time.time`) is shifted by -300 s or +300 s (the
  monotonic clock is not), the taker is a normal job of the same write mode (default options)
  that starts its commit while the holder is stopped;
- `taker_clock_ahead`: the holder has default options and a right clock; the taker is a normal
  job whose clock runs 300 s ahead of the store's (every modification time it reads is 300 s
  earlier than its own clock expects), so a judge of staleness by its own wall clock would find
  every claim older than the lease;
- `short_timeout`: the holder has default options; the taker uses `claim_timeout_s=0.2`;
- `longer_lease`: the holder declares a lease of 30 s (`claim_timeout_s=30`) and stays stopped
  past the taker's own lease (`claim_timeout_s=0.2`: its minimum, plus 1.5 s) but well within
  its own: the taker must judge it by the longer of the two leases and leave it alone;
- `lease_expired`: holder and taker both with `claim_timeout_s=0.2`, and the holder stopped
  for longer than the claim's lease (its minimum, where there is one, plus 1.5 s): the taker
  may take over, and the holder, when it goes on, must find it lost the claim before it changes
  anything a reader sees (at `decided` and `applying` only);
- `cleanup_race`: no second job: `cleanup_destination(store, older_than_s=0)` (what `dataferry
  cleanup DEST --older-than 0` runs) while the holder is stopped;
- `two_takers`: the holder is killed (SIGKILL) after its commit was decided, then two jobs take
  the dead claim over at once: one on a slow store (every operation 20 ms), the other with
  `claim_timeout_s=0.2` and started as the first one is recovering the dead commit (and once
  both at the same moment, with default options).

The holder stops at named points of its job commit, found in a baseline run of the same job
in a child of its own: `planning` (just after the claim is created), `decided` (just after
the intent record), `applying` (half way between the intent and `_SUCCESS`) and
`after_success` (just after `_SUCCESS`, in the job's cleanup). Every variant runs on a fresh
destination (mode `error`) and on one holding a committed data set (each write mode).

Once every process ended, `dataferry cleanup --older-than 0` runs as a user would, and the
destination is checked (`check_sides`): each job's files are all there (one attempt per task)
or none; a job that reported success has its rows there (unless an `overwrite` that finished
after it replaced them); `overwrite` never leaves two jobs' outputs, `error` never two and
none over data; the earlier data set is kept or wholly replaced by an `overwrite` that took
effect; `_SUCCESS` is there exactly when some job's output is, and names no file of a job whose
output is not there; nothing is left behind.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from . import invariants as inv
from .child import JOIN_S, ChildDriver, ChildSpec, carry, run_child
from .earlier import earlier_data
from .harness import (
    EXISTING,
    VARIANTS,
    Scenario,
    ScenarioStores,
    discard,
    error_chain,
    leftovers_allowed,
    quiet_store,
    seeded_uuid,
    variant_scenario,
)
from .overtaken import overtaken
from .race_checks import check_sides, final_cleanup
from .race_parties import (
    HOLDER_LEASE_S,
    PAUSE_S,
    RACE_AFTER_S,
    SCHEDULES,
    SHORT_TIMEOUT_S,
    SKEWS_S,
    TAKER_AHEAD_S,
    Side,
    lease_expiry_s,
    prepare_side,
    slow_store_rules,
)
from .scenario import run_threads

# --- variants and their points ------------------------------------------------------------------


@dataclass
class RaceVariant:
    destination: str
    mode: str
    uuids: tuple[str, str, str, str]  # earlier data, the holder, taker 1, taker 2
    points: dict[str, int] = field(default_factory=dict)
    success_op: int | None = None  # the holder's last operation on _SUCCESS
    status: str = ""  # how the holder's baseline ended
    alone_s: float = 0.0  # the holder's baseline, start to end

    @property
    def limit_s(self) -> float:
        """How long a side may take once it can go on before it counts as hung: JOIN_S, or
        three times the holder's whole run alone on this store when that is longer (a slow
        store on a loaded machine is not a deadlock)."""
        return max(JOIN_S, 3 * self.alone_s)


def points_of(trace: list[list[Any]], end: int) -> tuple[dict[str, int], int | None]:
    """The named points of a job commit's operations ([index, op, path, dest] each)."""
    from ..commit.records.intent import INTENT_FILE

    def first(pred: Callable[[list[Any]], bool]) -> int | None:
        return next((t[0] for t in trace if pred(t)), None)

    # the claim's creation; the last intent record before the last `_SUCCESS` at the top (a
    # committer with an inner commit, Hive's into its staging directory, writes one of each
    # before its own)
    claim = first(lambda t: t[2].endswith("claim.json") and t[1] == "create_if_absent")
    top = [t[0] for t in trace if inv.SUCCESS in (t[2], t[3])]
    success = top[-1] if top else None
    if success is None:
        success = next(
            (t[0] for t in reversed(trace) if "_SUCCESS" in t[2] or "_SUCCESS" in t[3]), None
        )
    intents = [
        t[0]
        for t in trace
        if t[2].endswith(INTENT_FILE)
        and t[1] in ("create", "create_if_absent")
        and (success is None or t[0] < success)
    ]
    intent = intents[-1] if intents else None
    start = trace[0][0] if trace else end
    points: dict[str, int] = {"planning": (claim if claim is not None else start) + 1}
    if intent is not None:
        points["decided"] = intent + 1
        if success is not None and success - intent > 2:
            points["applying"] = (intent + success) // 2 + 1
    if success is not None:
        points["after_success"] = success + 1
    seen: set[int] = set()
    out = {}
    for name, index in points.items():
        if index < end and index not in seen:
            seen.add(index)
            out[name] = index
    return out, success


class Races:
    """The schedules of one committer on one store (see the module docstring)."""

    def __init__(
        self,
        committer: str,
        stores: ScenarioStores,
        options: dict[str, Any],
        *,
        seed: int = 0,
        preload: tuple[str, ...] = (),
        workers: int = 2,
    ) -> None:
        self.committer, self.stores, self.options = committer, stores, options
        self.preload = tuple(preload)
        self.workers = max(1, workers)
        rng = random.Random(f"{seed}:races")
        self.variants = [
            RaceVariant(d, m, tuple(seeded_uuid(rng) for _ in range(4)))  # type: ignore[arg-type]
            for d, m in VARIANTS
        ]

    def _earlier(self, url: str, v: RaceVariant) -> inv.Snapshot:
        return earlier_data(self.committer, url, self.options, v.destination, v.uuids[0])

    def _takers(
        self,
        url: str,
        v: RaceVariant,
        options: tuple[dict, dict],
        rules: tuple[list, list],
        ahead_s: float = 0.0,
    ) -> tuple[Side, Side]:
        """Both takers prepared (tasks committed, job commit not started), in every schedule
        and baseline alike, so the holder's operations keep their indexes; the first one's
        clock `ahead_s` ahead of the store's."""
        c, mode = self.committer, v.mode
        return (
            prepare_side(c, url, mode, options[0], Side("T1", v.uuids[2]), rules[0], ahead_s),
            prepare_side(c, url, mode, options[1], Side("T2", v.uuids[3]), rules[1]),
        )

    def _spec(
        self, url: str, v: RaceVariant, options: dict[str, Any] | None = None, **kw: Any
    ) -> ChildSpec:
        opts = self.options if options is None else options
        return ChildSpec(self.committer, url, v.mode, opts, v.uuids[1], **kw, **carry(self.preload))

    def _allow(self, url: str, mode: str) -> tuple[str, ...]:
        return leftovers_allowed(self.committer, url, mode, self.options)

    def baseline(self, v: RaceVariant) -> Scenario:
        """The holder alone (the takers prepared, never committed): where its points are."""
        url = self.stores.url(f"r-{v.destination[0]}{v.mode}-base")
        earlier = self._earlier(url, v)
        takers = self._takers(url, v, (self.options, self.options), ([], []))
        began = time.monotonic()
        status, detail, report = run_child(self._spec(url, v, trace=True), timeout_s=3 * JOIN_S)
        v.alone_s = time.monotonic() - began
        for t in takers:
            t.abort()
        trace = report.get("trace") or []
        v.points, v.success_op = points_of(trace, report.get("commit_end") or 0)
        v.status = status
        scenario = variant_scenario(
            v,
            "race_baseline",
            outcome=status,
            schedule="the holder alone; points "
            + ", ".join(f"{k} op {i}" for k, i in v.points.items())
            + (f"; {detail}" if detail else ""),
        )
        holder = Side("H", v.uuids[1], status=status)
        holder.end = 0.0
        expected = "refused" if (v.destination, v.mode) == (EXISTING, "error") else "committed"
        if status != expected:
            scenario.problems.append(
                f"{inv.WRITE_MODE}: the holder alone, in mode {v.mode!r}, ended {status} "
                f"(expected {expected}): {detail[:200]}"
            )
        scenario.problems += check_sides(
            quiet_store(url), v.mode, earlier, [holder], self._allow(url, v.mode)
        )
        discard(quiet_store(url))
        return scenario

    def paused(self, schedule: str, v: RaceVariant, point: str, skew_s: float = 0.0) -> Scenario:
        """The holder stopped at `point` while its racer acts (a taker, or a cleanup)."""
        from ..commit.job.cleanup import cleanup_destination

        index = v.points[point]
        url = self.stores.url(f"r-{schedule[:2]}-{v.destination[0]}{v.mode}-{point[:3]}")
        earlier = self._earlier(url, v)
        short = {**self.options, "claim_timeout_s": SHORT_TIMEOUT_S}
        shorts = ("short_timeout", "longer_lease", "lease_expired")
        taker_options = short if schedule in shorts else self.options
        holder_options = short if schedule == "lease_expired" else self.options
        if schedule == "longer_lease":
            holder_options = {**self.options, "claim_timeout_s": HOLDER_LEASE_S}
        lengthy = ("lease_expired", "longer_lease")
        race_after = lease_expiry_s() if schedule in lengthy else RACE_AFTER_S
        ahead = TAKER_AHEAD_S if schedule == "taker_clock_ahead" else 0.0
        t1, t2 = self._takers(url, v, (taker_options, self.options), ([], []), ahead)
        sides = [Side("H", v.uuids[1]), t1]
        problems: list[str] = []
        racer_note: list[str] = []

        def race() -> None:
            if schedule == "cleanup_race":
                try:
                    done = cleanup_destination(quiet_store(url), older_than_s=0.0)
                    racer_note.append(
                        f"cleanup: rolled forward {len(done.rolled_forward)}, back "
                        f"{len(done.rolled_back)}, left {len(done.skipped_recent)}"
                    )
                except Exception as e:
                    racer_note.append(f"cleanup raised {type(e).__name__}")
                    _, unnamed = error_chain(e)
                    if unnamed:
                        problems.append(f"{inv.NAMED}: cleanup raised {unnamed}: {e}")
            else:
                t1.commit()

        holder = ChildDriver(self._spec(url, v, holder_options, pause_index=index, skew_s=skew_s))
        try:
            stopped = holder.wait_paused(v.limit_s)
            paused_at = time.monotonic()
            if stopped:
                time.sleep(race_after)
            racer = threading.Thread(target=race, name="dataferry-racer", daemon=True)
            racer.start()
            if stopped:
                racer.join(PAUSE_S)
            holder.resume()
            racer.join(v.limit_s)
            status, detail, holder_report = holder.finish(v.limit_s)
        finally:
            holder.kill()
        if racer.is_alive():
            problems.append(f"{inv.ONE_WRITER}: the racer did not end {v.limit_s:.0f} s later")
        h = sides[0]
        h.status, h.error, h.start = status, detail, 0.0
        done_before = v.success_op is not None and index > v.success_op
        ended = holder_report.get("ended") if isinstance(holder_report, dict) else None
        h.end = paused_at if done_before else float(ended or time.monotonic())
        judged_live = ("skewed_clock", "taker_clock_ahead", "longer_lease", "cleanup_race")
        if schedule in judged_live and stopped and h.status != v.status:
            lease = f" (its lease {HOLDER_LEASE_S:g} s)" if schedule == "longer_lease" else ""
            problems.append(
                f"{inv.LIVE}: the holder, alive and stopped for about "
                f"{race_after + PAUSE_S:g} s{lease}, ended {h.status} (alone: {v.status}): "
                + (f"the {schedule.replace('_', ' ')} overtook it" if racer_note else "")
                + (racer_note[0] if racer_note else f"taker {t1.status}")
            )
        if schedule == "cleanup_race":
            sides = [h]
        t2.abort()
        t1.abort()
        final_cleanup(url, problems)
        plain = quiet_store(url)
        problems += check_sides(plain, v.mode, earlier, sides, self._allow(url, v.mode))
        skew = f", holder's clock {skew_s:+g} s" if skew_s else ""
        if ahead:
            skew = f", taker's clock {ahead:+g} s"
        if schedule == "longer_lease":
            skew = f", its lease {HOLDER_LEASE_S:g} s, for {race_after:g} s"
        racer_what = racer_note[0] if racer_note else f"taker {t1.status} {t1.error[:120]}"
        scenario = variant_scenario(
            v,
            schedule,
            index=index,
            when="before",
            outcome=f"H {h.status}" + ("" if schedule == "cleanup_race" else f", T {t1.status}"),
            schedule=f"holder stopped at {point} (op {index}){skew}"
            + ("" if stopped else " (never reached)")
            + f"; {racer_what}"
            + (f"; holder: {detail[:160]}" if detail and h.status != "committed" else ""),
            problems=problems,
        )
        discard(plain)
        return scenario

    def two_takers(self, v: RaceVariant, point: str, staggered: bool) -> Scenario:
        """The holder killed at `point` (its commit decided); two takers at once."""
        index = v.points[point]
        url = self.stores.url(
            f"r-tt-{v.destination[0]}{v.mode}-{point[:3]}{'s' if staggered else ''}"
        )
        earlier = self._earlier(url, v)
        short = {**self.options, "claim_timeout_s": SHORT_TIMEOUT_S}
        if staggered:
            t1, t2 = self._takers(url, v, (self.options, short), (slow_store_rules(), []))
        else:
            t1, t2 = self._takers(url, v, (self.options, self.options), ([], []))
        status, detail, _ = run_child(self._spec(url, v, kill_index=index), v.limit_s)
        h = Side("H", v.uuids[1], status=status, error=detail, end=0.0)
        first = threading.Thread(target=t1.commit, name="dataferry-taker-1", daemon=True)
        second = threading.Thread(target=t2.commit, name="dataferry-taker-2", daemon=True)
        first.start()
        if staggered:
            time.sleep(0.1)
        second.start()
        problems: list[str] = []
        for t in (first, second):
            t.join(v.limit_s)
            if t.is_alive():
                problems.append(f"{inv.ONE_WRITER}: {t.name} did not end in {v.limit_s:.0f} s")
        final_cleanup(url, problems)
        plain = quiet_store(url)
        alone = v.status == "committed"  # (a holder refused alone never decides)
        decided = ("H",) if point != "planning" and status == "killed" and alone else ()
        problems += check_sides(
            plain, v.mode, earlier, [h, t1, t2], self._allow(url, v.mode), decided
        )
        how = "slow T1, T2 with a 0.2 s timeout 0.1 s later" if staggered else "both at once"
        scenario = variant_scenario(
            v,
            "two_takers",
            index=index,
            when="before",
            outcome=f"H {status}, T1 {t1.status}, T2 {t2.status}",
            schedule=f"holder killed at {point} (op {index}); {how}",
            problems=problems,
        )
        discard(plain)
        return scenario

    def plan(self, schedules: Collection[str]) -> list[Callable[[], Scenario]]:
        runs: list[Callable[[], Scenario]] = []
        for v in self.variants:
            for point in v.points:
                if "skewed_clock" in schedules:
                    for skew in SKEWS_S:
                        runs.append(
                            lambda v=v, p=point, s=skew: self.paused("skewed_clock", v, p, s)
                        )
                paused = ("taker_clock_ahead", "short_timeout", "longer_lease", "cleanup_race")
                for schedule in paused:
                    if schedule in schedules:
                        runs.append(lambda v=v, p=point, s=schedule: self.paused(s, v, p))
                if "lease_expired" in schedules and point in ("decided", "applying"):
                    runs.append(lambda v=v, p=point: self.paused("lease_expired", v, p))
                if "overtaken_batches" in schedules and point == "applying":
                    runs.append(lambda v=v: overtaken(self, v))
                if "two_takers" in schedules and point in ("decided", "applying"):
                    for staggered in (True, False):
                        runs.append(lambda v=v, p=point, s=staggered: self.two_takers(v, p, s))
        return runs


def run_races(
    committer: str,
    stores: ScenarioStores,
    options: dict[str, Any],
    *,
    schedules: Collection[str] = SCHEDULES,
    seed: int = 0,
    preload: tuple[str, ...] = (),
    workers: int = 2,
    variants: Collection[tuple[str, str]] | None = None,
    points: Collection[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Scenario]:
    """Every schedule in `schedules`, each variant (or only `variants`: (destination, mode)),
    at each named point (or only `points`): the baselines first, then the races,
    `workers` at a time."""
    races = Races(committer, stores, options, seed=seed, preload=preload, workers=workers)
    if variants is not None:
        races.variants = [v for v in races.variants if (v.destination, v.mode) in set(variants)]

    def plan() -> list[Callable[[], Scenario]]:
        if points is not None:
            for v in races.variants:
                v.points = {k: i for k, i in v.points.items() if k in set(points)}
        return races.plan(schedules)

    baselines = [lambda v=v: races.baseline(v) for v in races.variants]
    return run_threads(baselines, races.workers, "race", progress, then=plan)
