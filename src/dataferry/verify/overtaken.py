"""`overtaken_batches`: a holder overtaken while it publishes, and what it does next.

What it models: a driver that froze half way through publishing its decided commit (a long GC
pause, a frozen VM) for longer than its lease, so that another job took the destination over,
recovered the frozen commit and committed its own. When the frozen driver goes on, it must
stop at its next publish batch (each one asks the claim first): a driver that goes on
publishing the rest of its files changes what readers see after the other job's commit.

The holder and the taker both run with `claim_timeout_s=0.2` (their lease the claim's minimum);
the holder, traced, stops itself half way between its intent record and `_SUCCESS` (`applying`)
and stays stopped past its lease (`lease_expiry_s`); the taker then commits, to its end; what
readers see is noted (`inv.snapshot`), and only then does the holder go on. Once it ended:
readers must see exactly what they saw after the taker (`stable_after_success`), and the holder
may have sent no more publishing operations (renames, copies, upload completions into a visible
name) than the batches under way when it stopped could hold (`in_flight_limit`); then the
cleanup and the checks of every race (`check_sides`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..store import paths
from . import invariants as inv
from .child import ChildDriver
from .harness import Scenario, discard, quiet_store, variant_scenario
from .race_checks import check_sides, final_cleanup
from .race_parties import SHORT_TIMEOUT_S, Side, lease_expiry_s
from .reference import FILES_PER_TASK, TASKS

PUBLISHING = ("rename", "copy", "multipart_complete")


def publishes_after(trace: list[list[Any]], index: int) -> list[str]:
    """The visible names the traced operations from `index` on publish to."""
    out = []
    for i, op, path, dest in trace:
        target = dest or path
        if i >= index and op in PUBLISHING and target and not paths.is_hidden(target):
            out.append(target)
    return out


def in_flight_limit(options: dict[str, Any]) -> int:
    """How many publishes may follow a stop: the operation it stopped before, and the rest of
    the batches under way, one per worker thread, each the size a manifest commit makes them
    for the reference job's files (at least 1, at most 256: one fence per batch)."""
    pools = ("io_threads", "move_threads", "load_partition_threads", "threads")
    threads = max([int(options.get(name) or 1) for name in pools])
    batch = max(1, min(256, TASKS * FILES_PER_TASK // (threads * 8)))
    return threads * batch + 1


def overtaken(races: Any, v: Any) -> Scenario:
    """The schedule on one variant (see the module docstring); `races` the `races.Races` of
    the committer and store, `v` its `RaceVariant` (typed loosely: races.py imports this)."""
    index = v.points["applying"]
    url = races.stores.url(f"r-ob-{v.destination[0]}{v.mode}")
    earlier = races._earlier(url, v)
    short = {**races.options, "claim_timeout_s": SHORT_TIMEOUT_S}
    t1, t2 = races._takers(url, v, (short, races.options), ([], []))
    problems: list[str] = []
    holder = ChildDriver(races._spec(url, v, short, pause_index=index, trace=True))
    plain = quiet_store(url)
    seen: inv.Snapshot = {}
    try:
        stopped = holder.wait_paused(v.limit_s)
        if stopped:
            time.sleep(lease_expiry_s())
        racer = threading.Thread(target=t1.commit, name="dataferry-taker", daemon=True)
        racer.start()
        racer.join(v.limit_s)
        if racer.is_alive():
            problems.append(f"{inv.ONE_WRITER}: the taker did not end {v.limit_s:.0f} s later")
        seen = inv.snapshot(plain)
        holder.resume()
        status, detail, report = holder.finish(v.limit_s)
    finally:
        holder.kill()
    h = Side("H", v.uuids[1], status=status, error=detail, start=0.0)
    h.end = float(report.get("ended") or time.monotonic()) if isinstance(report, dict) else 0.0
    late = publishes_after(report.get("trace") or [], index) if stopped else []
    if t1.committed:
        changed = inv.diff(seen, inv.snapshot(plain))
        if changed:
            problems.append(
                f"{inv.STABLE}: the overtaken holder, going on, changed what readers saw after "
                f"the taker's commit: {changed}"
            )
    limit = in_flight_limit(races.options)
    if len(late) > limit:
        problems.append(
            f"{inv.ONE_WRITER}: the overtaken holder went on publishing: {len(late)} files "
            f"after it stopped (the batches under way hold at most {limit}), e.g. {late[-1]}"
        )
    t2.abort()
    t1.abort()
    final_cleanup(url, problems)
    problems += check_sides(plain, v.mode, earlier, [h, t1], races._allow(url, v.mode))
    scenario = variant_scenario(
        v,
        "overtaken_batches",
        index=index,
        when="before",
        outcome=f"H {h.status}, T {t1.status}",
        schedule=f"holder stopped at applying (op {index}) past its lease; taker {t1.status}"
        + ("" if stopped else " (never reached)")
        + f"; the holder then published {len(late)} file(s)"
        + (f"; holder: {detail[:160]}" if detail and h.status != "committed" else ""),
        problems=problems,
    )
    discard(plain)
    return scenario
