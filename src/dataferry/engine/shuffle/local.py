"""The embedded engine's shuffle: node services as subprocesses on loopback, map and reduce
tasks on a process pool, the driver in this process."""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa

from ...errors import ShuffleError
from ...shuffle import (
    AppCredentials,
    DriverConfig,
    LeaseKeeper,
    PushConfig,
    ReduceInput,
    ShuffleClient,
    ShuffleDriver,
    ShuffleServiceProcess,
    register_app,
)
from ...stats import IOStatistics
from ...store import LocalStore
from ..pool import run_with_retries, worker_context
from .codec import shuffle_schema
from .tasks import MapResult, MapTask, TableSource, run_map_task, run_reduce_task


@dataclass
class ShuffleRun:
    """The outcome of one shuffle: reduce results in reduce order, and how it went."""

    results: list[Any]
    wall_s: float
    push: bool
    map_reports: list[dict[str, Any]] = field(default_factory=list)
    read_reports: list[dict[str, Any]] = field(default_factory=list)
    finalize: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)
    services: dict[str, Any] = field(default_factory=dict)  # what the node services did

    def counter(self, name: str) -> int:
        return int(self.stats.get("counters", {}).get(name, 0))

    def service_counter(self, name: str) -> int:
        """A counter of the node services over this run (pushes received, blocks merged)."""
        return int(self.services.get("counters", {}).get(name, 0))


@dataclass(frozen=True)
class LocalShuffleConfig:
    """The embedded engine's shuffle.

    nodes: node shuffle services (each a subprocess with its own directory).
    workers: worker processes for map and reduce tasks (None: one per core).
    max_attempts: attempts per map or reduce task (spark.task.maxFailures).
    """

    nodes: int = 2
    workers: int | None = None
    max_attempts: int = 4
    driver: DriverConfig = field(default_factory=DriverConfig)
    push_config: PushConfig = field(default_factory=PushConfig)


class LocalShuffle:
    """Node services, a worker pool and the driver for shuffles on one machine.

    A service that dies is restarted on the same directory and port (as a node manager does),
    so its map outputs stay readable; merges it had not finalized are lost and read from the
    map outputs instead.
    """

    def __init__(self, config: LocalShuffleConfig | None = None, root: str | None = None) -> None:
        self.config = config or LocalShuffleConfig()
        self.root = root or tempfile.mkdtemp(prefix="dataferry-shuffle-")
        self.token = secrets.token_hex(16)
        self.app = f"app-{secrets.token_hex(4)}"
        self.services: list[ShuffleServiceProcess] = []
        self.credentials: AppCredentials | None = None  # the app's, once the services are up
        self._pool: ProcessPoolExecutor | None = None
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._next_shuffle = 0
        self.restarts = 0
        self._leases = LeaseKeeper()

    def start(self) -> LocalShuffle:
        for i in range(self.config.nodes):
            node_dir = os.path.join(self.root, f"node-{i}")
            LocalStore(node_dir).mkdirs("")
            self.services.append(ShuffleServiceProcess(node_dir, self.token).start())
        for svc in self.services:
            self._introduce(svc)
        # the service-wide token stays here: the tasks get the application's credentials
        self.credentials = register_app(self.app, self.addresses, self.token)
        self._leases.start().keep(self.credentials)  # registered while the shuffles run
        workers = self.config.workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=worker_context())
        self._supervisor = threading.Thread(target=self._supervise, daemon=True)
        self._supervisor.start()
        return self

    def _supervise(self) -> None:
        while not self._stop.wait(0.1):
            for svc in self.services:
                if not svc.alive and not self._stop.is_set():
                    try:
                        svc.restart()
                        self.restarts += 1
                        self._introduce(svc)
                    except Exception:  # keep supervising; the next round tries again
                        pass

    def _introduce(self, svc: ShuffleServiceProcess) -> None:
        """Tell a service where the other nodes' map outputs are (the nodes share this
        host), so a map's blocks reach it by reference (`PushConfig.by_reference`)."""
        with ShuffleClient(svc.address, self.token) as client:
            client.introduce({s.address: s.directory for s in self.services})

    def stop(self) -> None:
        self._stop.set()
        self._leases.stop()
        if self._supervisor is not None:
            self._supervisor.join(5)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for svc in self.services:
            svc.kill()

    def __enter__(self) -> LocalShuffle:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def addresses(self) -> list[str]:
        return [s.address for s in self.services]

    def run(
        self,
        sources: Sequence[TableSource],
        on: Sequence[str],
        num_reduces: int,
        *,
        push: bool = True,
        reduce_fn: Callable[[pa.Table], Any] | None = None,
        speculate_maps: Sequence[int] = (),
        on_map_done: Callable[[int], None] | None = None,
        keep_files: bool = False,
        push_config: PushConfig | None = None,
    ) -> ShuffleRun:
        """Shuffle the tables `sources` produce by `on` into `num_reduces` partitions;
        `push_config` replaces the cluster's for this shuffle."""
        assert self._pool is not None, "start() first"
        shuffle_id = self._next_shuffle
        self._next_shuffle += 1
        started = time.perf_counter()
        services_before = self._service_stats()
        driver = ShuffleDriver(
            self.app,
            shuffle_id,
            len(sources),
            num_reduces,
            self.addresses,
            credentials=self.credentials,
            config=self.config.driver,
            push=push_config or self.config.push_config,
            enabled=push,
        )
        maps = self._run_maps(driver, sources, tuple(on), num_reduces, speculate_maps, on_map_done)
        t_maps = time.perf_counter()
        merged = driver.finalize()
        t_final = time.perf_counter()
        statuses = tuple(driver.map_statuses())
        schema = shuffle_schema([(m.schema, m.status.total_size > 0) for m in maps])
        # every node shares this host: reducers read merged files (and the blocks merged by
        # reference) from the nodes' directories
        local_dirs = {s.address: s.directory for s in self.services}
        inputs = [
            ReduceInput(
                self.app,
                shuffle_id,
                driver.merge_id,
                r,
                statuses,
                merged.get(r),
                self.credentials,
                local_dirs=local_dirs,
            )
            for r in range(num_reduces)
        ]
        reduces = self._run_all(
            [(run_reduce_task, (inp, schema, reduce_fn)) for inp in inputs], "reduce"
        )
        t_reduce = time.perf_counter()
        if not keep_files:
            driver.remove()
        stats = IOStatistics()
        for m in maps:
            stats.merge(m.stats)
        for r in reduces:
            stats.merge(r.stats)
        stats.merge(driver.stats.snapshot())
        services = IOStatistics(self._service_stats()).diff(services_before)
        return ShuffleRun(
            results=[r.value for r in sorted(reduces, key=lambda r: r.reduce_id)],
            wall_s=time.perf_counter() - started,
            push=driver.push_enabled,
            map_reports=[m.push for m in maps],
            read_reports=[r.read for r in reduces],
            finalize=asdict(driver.finalize_report),
            stats=stats.snapshot(),
            stages={
                "map_s": t_maps - started,
                "finalize_s": t_final - t_maps,
                "reduce_s": t_reduce - t_final,
            },
            services=services,
        )

    def _service_stats(self) -> dict[str, Any]:
        """The node services' statistics, added up (a service being restarted counts none)."""
        total = IOStatistics()
        for svc in self.services:
            try:
                with ShuffleClient(svc.address, self.token) as c:
                    total.merge(c.service_stats())
            except ShuffleError:
                pass
        return total.snapshot()

    def _run_maps(
        self,
        driver: ShuffleDriver,
        sources: Sequence[TableSource],
        on: tuple[str, ...],
        num_reduces: int,
        speculate: Sequence[int],
        on_map_done: Callable[[int], None] | None,
    ) -> list[MapResult]:
        nodes = len(self.services)

        def task(i: int, attempt: int) -> MapTask:
            node = self.services[i % nodes]
            return MapTask(
                self.app,
                driver.shuffle_id,
                i,
                attempt,
                node.directory,
                node.address,
                num_reduces,
                on,
                sources[i],
                driver.target if driver.push_enabled else None,
            )

        calls = [(run_map_task, (task(i, 0),)) for i in range(len(sources))]
        calls += [(run_map_task, (task(i, 1),)) for i in speculate]  # duplicates race
        winners: dict[int, MapResult] = {}

        def done(result: MapResult) -> None:
            if driver.map_finished(result.status) and on_map_done is not None:
                on_map_done(result.status.map_index)
            winners.setdefault(result.status.map_index, result)

        self._run_all(calls, "map", on_result=done)
        return [winners[i] for i in range(len(sources))]

    def _run_all(
        self,
        calls: list[tuple[Callable[..., Any], tuple[Any, ...]]],
        kind: str,
        on_result: Callable[[Any], None] | None = None,
    ) -> list[Any]:
        """Run calls on the pool, retrying a failed one up to max_attempts times; a map task's
        new attempt gets a new attempt number, so its output gets its own files."""
        assert self._pool is not None
        return run_with_retries(
            self._pool,
            calls,
            max_attempts=self.config.max_attempts,
            kind=kind,
            retry_args=_next_map_attempt if kind == "map" else None,
            on_result=on_result,
        )


def _next_map_attempt(args: tuple[Any, ...], tries: int) -> tuple[Any, ...]:
    task: MapTask = args[0]
    return (replace(task, attempt=task.attempt + 10 * tries), *args[1:])
