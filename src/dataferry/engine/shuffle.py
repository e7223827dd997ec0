"""Shuffle stages on our engines: Arrow encoding of blocks, the map and reduce tasks, and the
embedded engine's shuffle (node services as subprocesses on loopback, tasks on a process pool).

A map task hash-partitions its table by the key columns (pandas' hash, as Dask's shuffle does,
so both put a key in the same output partition), encodes each part as an Arrow IPC stream (one
block), writes the map output to its node's shuffle directory and, with push on, pushes the
blocks to the mergers. A reduce task reads its blocks (merged chunks plus originals, or only
originals for a pull-based shuffle) and decodes them into one table.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import EngineError
from ..shuffle import (
    DriverConfig,
    MapStatus,
    PushConfig,
    PushTarget,
    ReduceInput,
    ShuffleDriver,
    ShuffleServiceProcess,
    push_map_output,
    read_reduce,
    write_map_output,
)
from ..shuffle.blocks import Block
from ..shuffle.mapoutput import block_sizes
from ..stats import IOStatistics
from ..store import LocalStore, open_store
from .local import _worker_context

TableSource = Callable[[], Any]  # returns a pyarrow Table or a pandas DataFrame


# --- encoding (the engine's choice: Arrow IPC) ----------------------------------------------


def as_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    return pa.Table.from_pandas(data, preserve_index=False)


def partition_ids(table: pa.Table, on: Sequence[str], n: int) -> np.ndarray:
    """Output partition of every row: pandas' hash of the key columns modulo n, numeric keys
    hashed as float64, which is Dask's rule, so a key lands where `ddf.shuffle` puts it."""
    import pandas as pd

    keys = table.select(list(on)).to_pandas()
    numeric = {c: np.float64 for c, t in keys.dtypes.items() if pd.api.types.is_numeric_dtype(t)}
    if numeric:
        keys = keys.astype(numeric, errors="ignore")
    hashed = pd.util.hash_pandas_object(keys, index=False).to_numpy()
    ids = hashed % np.uint64(n)
    # small integer types let numpy's stable sort run as a radix sort
    return ids.astype(np.int16 if n <= 32767 else np.int64)


def split_table(table: pa.Table, on: Sequence[str], n: int) -> list[pa.Table]:
    """The table's rows per output partition (one take and n zero-copy slices)."""
    parts = partition_ids(table, on, n)
    order = np.argsort(parts, kind="stable")
    ordered = table.take(pa.array(order))
    counts = np.bincount(parts, minlength=n)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [ordered.slice(int(bounds[i]), int(counts[i])) for i in range(n)]


def encode_block(table: pa.Table) -> bytes:
    if table.num_rows == 0:
        return b""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def decode_blocks(blocks: Sequence[Block], schema: pa.Schema | None = None) -> pa.Table:
    tables = [pa.ipc.open_stream(pa.py_buffer(b.payload)).read_all() for b in blocks]
    if not tables:
        if schema is None:
            raise EngineError("no blocks and no schema: cannot build an empty table")
        return schema.empty_table()
    return pa.concat_tables(tables)


# --- tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MapTask:
    """One map attempt (picklable): where to write, whom to push to, what to read."""

    app: str
    shuffle_id: int
    map_index: int
    attempt: int
    node_dir: str
    location: str
    num_reduces: int
    on: tuple[str, ...]
    source: TableSource | None = None  # None: the data is passed to run_map_task
    target: PushTarget | None = None  # None: pull-based (no push)


@dataclass
class MapResult:
    status: MapStatus
    push: dict[str, Any]
    stats: dict[str, Any]
    schema: pa.Schema
    seconds: float


def run_map_task(task: MapTask, data: Any = None) -> MapResult:
    """Run one map attempt on `data` (a table or DataFrame), or on what its source returns."""
    started = time.perf_counter()
    table = as_table(task.source() if data is None else data)
    payloads = [encode_block(t) for t in split_table(table, task.on, task.num_reduces)]
    store = open_store(task.node_dir)
    framed: list[bytes] = []
    offsets = write_map_output(
        store, task.app, task.shuffle_id, task.map_index, task.attempt, payloads, framed
    )
    sizes = block_sizes(offsets)
    stats = IOStatistics()
    push: dict[str, Any] = {}
    if task.target is not None:
        report = push_map_output(
            store, task.target, task.map_index, task.attempt, offsets, stats, framed
        )
        push = asdict(report)
    status = MapStatus(task.map_index, task.attempt, task.location, sizes, push.get("blocks", 0))
    stats.merge(store.stats.snapshot())
    return MapResult(status, push, stats.snapshot(), table.schema, time.perf_counter() - started)


@dataclass
class ReduceResult:
    reduce_id: int
    value: Any
    read: dict[str, Any]
    stats: dict[str, Any]


def run_reduce_task(
    inp: ReduceInput, schema: pa.Schema, reduce_fn: Callable[[pa.Table], Any] | None = None
) -> ReduceResult:
    stats = IOStatistics()
    blocks, report = read_reduce(inp, stats)
    table = decode_blocks(blocks, schema)
    value = reduce_fn(table) if reduce_fn is not None else table
    return ReduceResult(inp.reduce_id, value, asdict(report), stats.snapshot())


def table_summary(table: pa.Table) -> dict[str, int]:
    """What a benchmark's reduce task returns instead of its table: its row count."""
    return {"rows": table.num_rows}


# --- the embedded engine's shuffle ------------------------------------------------------------


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

    def counter(self, name: str) -> int:
        return int(self.stats.get("counters", {}).get(name, 0))


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
        self._pool: ProcessPoolExecutor | None = None
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._next_shuffle = 0
        self.restarts = 0

    def start(self) -> LocalShuffle:
        for i in range(self.config.nodes):
            node_dir = os.path.join(self.root, f"node-{i}")
            LocalStore(node_dir).mkdirs("")
            self.services.append(ShuffleServiceProcess(node_dir, self.token).start())
        workers = self.config.workers or os.cpu_count() or 1
        self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=_worker_context())
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
                    except Exception:  # keep supervising; the next round tries again
                        pass

    def stop(self) -> None:
        self._stop.set()
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
    ) -> ShuffleRun:
        """Shuffle the tables `sources` produce by `on` into `num_reduces` partitions."""
        assert self._pool is not None, "start() first"
        shuffle_id = self._next_shuffle
        self._next_shuffle += 1
        started = time.perf_counter()
        driver = ShuffleDriver(
            self.app,
            shuffle_id,
            len(sources),
            num_reduces,
            self.addresses,
            token=self.token,
            config=self.config.driver,
            push=self.config.push_config,
            enabled=push,
        )
        maps = self._run_maps(driver, sources, tuple(on), num_reduces, speculate_maps, on_map_done)
        t_maps = time.perf_counter()
        merged = driver.finalize()
        t_final = time.perf_counter()
        statuses = tuple(driver.map_statuses())
        schema = maps[0].schema
        inputs = [
            ReduceInput(
                self.app,
                shuffle_id,
                driver.merge_id,
                r,
                statuses,
                merged.get(r),
                self.token,
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
        )

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
        """Run calls on the pool, retrying a failed one up to max_attempts times."""
        assert self._pool is not None
        pending: dict[Future, tuple[int, int]] = {}
        results: list[Any] = [None] * len(calls)
        for i, (fn, args) in enumerate(calls):
            pending[self._pool.submit(fn, *args)] = (i, 1)
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                i, tries = pending.pop(fut)
                error = fut.exception()
                if error is None:
                    results[i] = fut.result()
                    if on_result is not None:
                        on_result(results[i])
                    continue
                if tries >= self.config.max_attempts:
                    raise EngineError(f"{kind} task {i} failed {tries} times: {error}") from error
                fn, args = calls[i]
                if kind == "map":  # a new attempt number: its output gets its own files
                    args = (_next_attempt(args[0], tries),)
                pending[self._pool.submit(fn, *args)] = (i, tries + 1)
        return results


def _next_attempt(task: MapTask, tries: int) -> MapTask:
    return replace(task, attempt=task.attempt + 10 * tries)
