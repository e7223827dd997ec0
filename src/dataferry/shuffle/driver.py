"""The driver side of push-based shuffle: choose mergers, track maps and pushes, finalize.

Stages: `plan` (choose mergers among the node services: contiguous reduce ranges per merger;
too few services turns push off), `track` (map statuses as maps finish, push completions),
`finalize` (wait until enough pushes are complete or `finalize_timeout`, then finalize every
merger in parallel and wait at most `results_timeout`), `remove` (delete the shuffle's files on
every service). A merger that fails or does not answer merges nothing; the stage never fails
because of a merger. The driver speaks for its application with the credentials registration
gave it (`register_app`), and hands them to its tasks in their push targets.

`plan`, `finalize_wait`, `finalize_rpc` and `remove` are stages of the stage base (durations
under `shuffle_stage_<name>` in the driver's statistics, seconds in `driver.run`), logged at
INFO on the `dataferry.shuffle` logger; `track` is the driver's state between them.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from ..errors import ShuffleError
from ..extras import require
from ..net.addresses import parse_service_address
from ..net.tls import normalize_fingerprint
from ..stages import StageRun, stage
from ..stats import IOStatistics
from .client import ShuffleClient
from .config import DriverConfig, PushConfig
from .mapoutput import MapStatus
from .pusher import PushTarget
from .tenancy import AppCredentials

BitMap = require("pyroaring", "the push shuffle").BitMap

_POLL_S = 0.02  # how often the mergers are asked for push completions while the driver waits

log = logging.getLogger("dataferry.shuffle")


@dataclass(frozen=True)
class MergedPartition:
    """A merged reduce partition and the merger that holds it."""

    reduce_id: int
    location: str
    bitmap: BitMap
    size: int


@dataclass
class FinalizeReport:
    waited_s: float = 0.0
    used: bool = False  # False: the merge results are ignored (small shuffle, push off)
    mergers_ok: list[str] = field(default_factory=list)
    mergers_failed: dict[str, str] = field(default_factory=dict)
    merged_partitions: int = 0
    merged_bytes: int = 0


class ShuffleDriver:
    def __init__(
        self,
        app: str,
        shuffle_id: int,
        num_maps: int,
        num_reduces: int,
        services: Sequence[str],
        *,
        credentials: AppCredentials | None = None,
        fingerprint: str = "",
        config: DriverConfig | None = None,
        push: PushConfig | None = None,
        merge_id: int = 0,
        enabled: bool = True,
    ) -> None:
        self.app, self.shuffle_id = app, shuffle_id
        self.num_maps, self.num_reduces = num_maps, num_reduces
        self.services = list(services)
        for address in self.services:  # on the driver, before any map task pushes to them
            parse_service_address(address, "shuffle service")
        fingerprint = normalize_fingerprint(fingerprint)
        self.credentials, self.fingerprint = credentials, fingerprint  # one TLS identity per job
        self.config = config or DriverConfig()
        self.merge_id = merge_id
        self.stats = IOStatistics()
        self.run = StageRun(self.stats, logger=log, label=f"shuffle {app}/{shuffle_id}")
        self.mergers = (
            choose_mergers(self.run, self.services, shuffle_id, num_reduces, self.config)
            if enabled
            else ()
        )
        self.target = PushTarget(
            app,
            shuffle_id,
            merge_id,
            num_reduces,
            self.mergers,
            credentials,
            push or PushConfig(),
            fingerprint,
        )
        self.statuses: dict[int, MapStatus] = {}
        self._pushed: set[int] = set()
        self._changed = threading.Condition()
        self._maps_done_at: float | None = None
        self.merged: dict[int, MergedPartition] = {}
        self.finalize_report = FinalizeReport()

    @property
    def push_enabled(self) -> bool:
        return bool(self.mergers)

    # --- track -----------------------------------------------------------------------------

    def map_finished(self, status: MapStatus, pushed: bool | None = None) -> bool:
        """Register a map attempt's output; the first attempt to finish wins (a speculative or
        retried duplicate is ignored). Returns True if this attempt's output is the one used.
        `pushed`: whether the map's pushes are complete; by default they are unless maps push
        in the background (`PushConfig.background`), whose completions the mergers collect."""
        if pushed is None:
            pushed = not self.target.config.background
        if len(status.sizes) != self.num_reduces:
            raise ShuffleError(
                f"map {status.map_index} reported {len(status.sizes)} block sizes, "
                f"expected {self.num_reduces}"
            )
        with self._changed:
            won = status.map_index not in self.statuses
            if won:
                self.statuses[status.map_index] = status
            if pushed:
                self._pushed.add(status.map_index)
            if len(self.statuses) == self.num_maps and self._maps_done_at is None:
                self._maps_done_at = time.monotonic()
            self._changed.notify_all()
        return won

    def push_finished(self, map_index: int) -> None:
        """A map's pushes are done (Spark's ShufflePushCompletion)."""
        self.push_completions({map_index})

    def map_statuses(self) -> list[MapStatus]:
        missing = [m for m in range(self.num_maps) if m not in self.statuses]
        if missing:
            raise ShuffleError(f"shuffle {self.shuffle_id}: maps {missing[:10]} have no output")
        return [self.statuses[m] for m in range(self.num_maps)]

    # --- finalize --------------------------------------------------------------------------

    def finalize(self) -> dict[int, MergedPartition]:
        """Finalize the merge; returns the merged partitions the reducers may use."""
        report = self.finalize_report
        if not self.push_enabled:
            return {}
        total = sum(s.total_size for s in self.statuses.values())
        use = total >= self.config.min_shuffle_size_to_wait
        if use:
            report.waited_s = finalize_wait(self.run, self)
        results, report.mergers_failed = finalize_rpc(
            self.run, self.target, self.config.results_timeout_s
        )
        report.mergers_ok = sorted(results)
        report.used = use
        if not use:
            return {}  # a small shuffle: finalized so the services close their files; not used
        self.merged = merged_partitions(self.target, results)
        report.merged_bytes = sum(m.size for m in self.merged.values())
        report.merged_partitions = len(self.merged)
        return self.merged

    def _wait_for_pushes(self) -> float:
        """Wait until enough maps have completed their pushes, or `finalize_timeout` after the
        last map. Completions of background pushes are collected from the mergers."""
        start = time.monotonic()
        poll = _CompletionPoll(self)
        try:
            while True:
                with self._changed:
                    ratio = len(self._pushed) / max(1, self.num_maps)
                    if ratio >= self.config.min_completed_push_ratio:
                        break
                    done = self._maps_done_at if self._maps_done_at is not None else start
                    left = done + self.config.finalize_timeout_s - time.monotonic()
                    if left <= 0:
                        self.stats.incr("finalize_timed_out")
                        break
                    awaiting = set(self.statuses) - self._pushed
                if awaiting:
                    self.push_completions(poll.completed(awaiting))
                    if poll.all_gone:
                        break  # no merger answers: nothing will be merged, waiting is pointless
                with self._changed:
                    if len(self._pushed) / max(1, self.num_maps) < (
                        self.config.min_completed_push_ratio
                    ):
                        self._changed.wait(min(left, _POLL_S) if awaiting else left)
        finally:
            poll.close()
        return time.monotonic() - start

    def push_completions(self, maps: set[int]) -> None:
        """Maps whose pushes are complete, as the mergers report them."""
        if maps:
            with self._changed:
                self._pushed |= maps
                self._changed.notify_all()

    # --- remove ----------------------------------------------------------------------------

    def remove(self) -> dict[str, bool]:
        """Delete the shuffle's files on every service (map outputs and merges)."""
        return remove_shuffle(self.run, self.services, self.target)


# --- the stages ----------------------------------------------------------------------------


@stage("shuffle_stage_plan", "plan")
def choose_mergers(
    run: StageRun,
    services: Sequence[str],
    shuffle_id: int,
    num_reduces: int,
    config: DriverConfig,
) -> tuple[str, ...]:
    """The mergers of one shuffle (Spark's rule: one per `reduces_per_merger` reduces, none
    when fewer services than the thresholds ask for are there), rotated by shuffle id so that
    concurrent shuffles spread their merges over the nodes."""
    desired = min(len(services), max(1, math.ceil(num_reduces / config.reduces_per_merger)))
    needed = max(
        config.mergers_min_static_threshold,
        math.floor(desired * config.mergers_min_threshold_ratio),
    )
    if desired < needed or not services:
        run.stats.incr("push_disabled_too_few_mergers")
        return ()
    first = shuffle_id % len(services)
    ring = list(services[first:]) + list(services[:first])
    return tuple(ring[:desired])


@stage("shuffle_stage_finalize_wait", "finalize_wait")
def finalize_wait(run: StageRun, driver: ShuffleDriver) -> float:
    """Wait until enough of the driver's maps have completed their pushes (or its
    `finalize_timeout` after the last map); returns the seconds waited."""
    return driver._wait_for_pushes()


@stage("shuffle_stage_finalize_rpc", "finalize_rpc")
def finalize_rpc(
    run: StageRun, target: PushTarget, timeout_s: float
) -> tuple[dict[str, list], dict[str, str]]:
    """Finalize every merger in parallel, waiting at most `timeout_s`: (the answers of the
    mergers that answered, by address; why each other merger merged nothing)."""
    results: dict[str, list] = {}
    failed: dict[str, str] = {}

    def one(address: str) -> None:
        with ShuffleClient(
            address,
            timeout=timeout_s,
            fingerprint=target.fingerprint,
            credentials=target.credentials,
        ) as c:
            results[address] = c.finalize(target.app, target.shuffle_id, target.merge_id)

    pool = ThreadPoolExecutor(min(8, len(target.mergers)), thread_name_prefix="shuffle-finalize")
    futures = {pool.submit(one, a): a for a in target.mergers}
    done, pending = wait(futures, timeout=timeout_s)
    for f in done:
        if f.exception() is not None:
            failed[futures[f]] = str(f.exception())
    for f in pending:
        f.cancel()
        failed[futures[f]] = "no answer within results_timeout"
    pool.shutdown(wait=False, cancel_futures=True)
    run.stats.incr("mergers_failed", len(failed))
    for address, why in failed.items():
        run.logger.info("%s: merger %s merged nothing: %s", run.label, address, why)
    return {a: r for a, r in results.items() if a not in failed}, failed


def merged_partitions(target: PushTarget, results: dict[str, list]) -> dict[int, MergedPartition]:
    """The merged partitions the reducers may use: each merger's answers for its own reduce
    range only (an answer outside it is ignored rather than trusted)."""
    merged: dict[int, MergedPartition] = {}
    for address, statuses in results.items():
        for s in statuses:
            if target.mergers[target.merger_of(s.reduce_id)] != address:
                continue
            merged[s.reduce_id] = MergedPartition(s.reduce_id, address, s.bitmap, s.size)
    return merged


@stage("shuffle_stage_remove", "remove")
def remove_shuffle(run: StageRun, services: Sequence[str], target: PushTarget) -> dict[str, bool]:
    """Delete the shuffle's files on every service; whether each one did."""
    removed: dict[str, bool] = {}
    for address in services:
        try:
            with ShuffleClient(
                address, fingerprint=target.fingerprint, credentials=target.credentials
            ) as c:
                removed[address] = c.remove(target.app, target.shuffle_id)
        except ShuffleError:
            removed[address] = False
    return removed


class _CompletionPoll:
    """Asks every merger which maps have completed their pushes to it; a map is complete when
    every merger that answers says so (a merger that cannot be reached is not waited for:
    its pushes are lost anyway, and its partitions are read from the map outputs)."""

    def __init__(self, driver: ShuffleDriver) -> None:
        self.driver = driver
        self.clients: dict[str, ShuffleClient] = {}
        self.gone: set[str] = set()

    def completed(self, awaiting: set[int]) -> set[int]:
        d = self.driver
        done = set(awaiting)
        for address in d.mergers:
            if address in self.gone:
                continue
            client = self.clients.get(address)
            if client is None:
                client = self.clients[address] = ShuffleClient(
                    address,
                    timeout=d.config.results_timeout_s,
                    fingerprint=d.fingerprint,
                    credentials=d.credentials,
                )
            try:
                done &= set(client.pushed_maps(d.app, d.shuffle_id, d.merge_id))
            except ShuffleError:
                self.gone.add(address)
                d.stats.incr("push_completion_mergers_gone")
        d.stats.incr("push_completion_polls")
        return set() if self.all_gone else done

    @property
    def all_gone(self) -> bool:
        return len(self.gone) == len(self.driver.mergers)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
