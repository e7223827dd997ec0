"""The driver side of push-based shuffle: choose mergers, track maps and pushes, finalize.

Stages: `plan` (choose mergers among the node services: contiguous reduce ranges per merger;
too few services turns push off), `track` (map statuses as maps finish, push completions),
`finalize` (wait until enough pushes are complete or `finalize_timeout`, then finalize every
merger in parallel and wait at most `results_timeout`), `remove` (delete the shuffle's files on
every service). A merger that fails or does not answer merges nothing; the stage never fails
because of a merger. The driver speaks for its application with the credentials registration
gave it (`register_app`), and hands them to its tasks in their push targets.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from pyroaring import BitMap

from ..errors import ShuffleError
from ..net.addresses import parse_service_address
from ..net.tls import normalize_fingerprint
from ..stats import IOStatistics, StageClock
from .client import ShuffleClient
from .config import DriverConfig, PushConfig
from .mapoutput import MapStatus
from .pusher import PushTarget
from .tenancy import AppCredentials

_POLL_S = 0.02  # how often the mergers are asked for push completions while the driver waits


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
        self.clock = StageClock(self.stats)
        self.mergers = self._choose_mergers() if enabled else ()
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

    # --- plan ------------------------------------------------------------------------------

    def _choose_mergers(self) -> tuple[str, ...]:
        cfg = self.config
        desired = min(
            len(self.services), max(1, math.ceil(self.num_reduces / cfg.reduces_per_merger))
        )
        needed = max(
            cfg.mergers_min_static_threshold,
            math.floor(desired * cfg.mergers_min_threshold_ratio),
        )
        if desired < needed or not self.services:
            self.stats.incr("push_disabled_too_few_mergers")
            return ()
        # rotate by shuffle id so that concurrent shuffles spread their merges over the nodes
        first = self.shuffle_id % len(self.services)
        ring = self.services[first:] + self.services[:first]
        return tuple(ring[:desired])

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
        with self.clock.stage("finalize_wait"):
            if use:
                report.waited_s = self._wait_for_pushes()
        with self.clock.stage("finalize_rpc"):
            results = self._finalize_all()
        report.used = use
        if not use:
            return {}  # a small shuffle: finalized so the services close their files; not used
        for address, statuses in results.items():
            for s in statuses:
                if self.target.mergers[self.target.merger_of(s.reduce_id)] != address:
                    continue  # not this merger's range: ignore rather than trust
                self.merged[s.reduce_id] = MergedPartition(s.reduce_id, address, s.bitmap, s.size)
                report.merged_bytes += s.size
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

    def _finalize_all(self) -> dict[str, list]:
        results: dict[str, list] = {}
        report = self.finalize_report

        def one(address: str) -> None:
            with ShuffleClient(
                address,
                timeout=self.config.results_timeout_s,
                fingerprint=self.fingerprint,
                credentials=self.credentials,
            ) as c:
                results[address] = c.finalize(self.app, self.shuffle_id, self.merge_id)

        pool = ThreadPoolExecutor(min(8, len(self.mergers)), thread_name_prefix="shuffle-finalize")
        futures = {pool.submit(one, a): a for a in self.mergers}
        done, pending = wait(futures, timeout=self.config.results_timeout_s)
        for f in done:
            if f.exception() is not None:
                report.mergers_failed[futures[f]] = str(f.exception())
        for f in pending:
            f.cancel()
            report.mergers_failed[futures[f]] = "no answer within results_timeout"
        pool.shutdown(wait=False, cancel_futures=True)
        report.mergers_ok = sorted(a for a in results if a not in report.mergers_failed)
        self.stats.incr("mergers_failed", len(report.mergers_failed))
        return {a: results[a] for a in report.mergers_ok}

    # --- remove ----------------------------------------------------------------------------

    def remove(self) -> dict[str, bool]:
        """Delete the shuffle's files on every service (map outputs and merges)."""
        removed: dict[str, bool] = {}
        for address in self.services:
            try:
                with ShuffleClient(
                    address, fingerprint=self.fingerprint, credentials=self.credentials
                ) as c:
                    removed[address] = c.remove(self.app, self.shuffle_id)
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
