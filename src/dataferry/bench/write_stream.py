"""One writer writing a generated stream, alone in a fresh process, for `dataferry bench write
--stream`: `python -m dataferry.bench.write_stream '<json>'` prints one JSON line with the
write's wall time and the peak RSS of this process and of its children.

The stream is made on the fly, batch after batch, from the synthetic sales schema
(`sales_table`, with `days=partitions` so that `day` has one value per partition); it is never
whole in memory unless a writer collects it. Generating a batch with numpy's random numbers and
strings costs about as much as writing it, so a pool of `POOL_BATCHES` generated batches is made
during setup, before the clock starts (`BatchPool`), and batch i of the stream is derived from
it with cheap Arrow operations: its `day` column from pool batch i % P, its other columns from
pool batch (i // P) % P (so a partition's rows differ from batch to batch: they repeat only
every P*P batches, far apart in any file, page or row group), `order_id` the stream's own run of
ids (every row distinct), and each column copied into buffers of its own (a writer that holds
batches pays for them, as it would for generated ones). Every writer gets the same batches.
Setup (imports, the pool, a Dask cluster) is done before the clock starts; deriving the batches
is in every writer's time alike, and `generate only` times it alone (the batches made and
dropped): the floor no writer can go under.

Peak RSS: the kernel's high-water mark of this process's resident set (VmHWM in
/proc/self/status; `getrusage` ru_maxrss where there is no /proc), read after setup (`start`)
and after the write (`self`); and its descendants' total RSS, sampled with psutil every 0.1 s
during the write (`children`; the writers here start none, but a writer that did would be
counted). ru_maxrss is not used on Linux: it keeps the parent's peak across fork and exec.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import resource
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..dataset.synthetic import sales_table
from .table_writers import duckdb_copy
from .writers import (
    DASK_MODULES,
    FERRY_MODULES,
    dask_to_parquet,
    dataferry_keywords,
)

PARTITION_COLUMN = "day"


@dataclass(frozen=True)
class StreamShape:
    batches: int
    batch_rows: int
    partitions: int
    batch_bytes: int = 0  # in memory, of one batch
    dask_partition_batches: int = 16  # batches in one Dask partition (1M rows by default)

    @property
    def rows(self) -> int:
        return self.batches * self.batch_rows

    @property
    def dask_partitions(self) -> int:
        return -(-self.batches // self.dask_partition_batches)


POOL_BATCHES = 8  # generated batches the stream is derived from (P: P*P distinct mixes)


def make_batch(index: int, rows: int, partitions: int) -> pa.RecordBatch:
    """A generated batch (numpy's random numbers, seeded by `index`): the pool's batches."""
    table = sales_table(rows, days=partitions, seed=index)
    ids = pa.array(np.arange(index * rows, (index + 1) * rows, dtype=np.int64))
    table = table.set_column(table.schema.get_field_index("order_id"), "order_id", ids)
    return table.combine_chunks().to_batches(max_chunksize=rows)[0]


class BatchPool:
    """`POOL_BATCHES` generated batches, made once; the stream's batches derived from them."""

    def __init__(self, rows: int, partitions: int) -> None:
        self.rows = rows
        self.pool = [make_batch(k, rows, partitions) for k in range(POOL_BATCHES)]
        self.day = self.pool[0].schema.get_field_index(PARTITION_COLUMN)
        self.order_id = self.pool[0].schema.get_field_index("order_id")

    def batch(self, index: int) -> pa.RecordBatch:
        """Batch `index` of the stream: `day` from pool batch index % P, the other columns
        from pool batch (index // P) % P, its own order ids; every column in new buffers."""
        p = len(self.pool)
        days, rest = self.pool[index % p], self.pool[(index // p) % p]
        ids = np.arange(index * self.rows, (index + 1) * self.rows, dtype=np.int64)
        columns = [
            pa.array(ids)
            if i == self.order_id
            else pa.concat_arrays([(days if i == self.day else rest).column(i)])  # (a copy)
            for i in range(rest.num_columns)
        ]
        return pa.RecordBatch.from_arrays(columns, schema=rest.schema)


@functools.cache
def batch_pool(rows: int, partitions: int) -> BatchPool:
    """The pool of a stream's shape, made once per process (in setup, before the clock)."""
    return BatchPool(rows, partitions)


def shape_for(size: int, partitions: int, batch_rows: int) -> StreamShape:
    """As many batches of `batch_rows` as make `size` bytes in memory (at least one)."""
    one = make_batch(0, batch_rows, partitions).nbytes
    return StreamShape(max(1, round(size / one)), batch_rows, partitions, one)


def batches(
    shape: StreamShape, start: int = 0, stop: int | None = None
) -> Iterator[pa.RecordBatch]:
    pool = batch_pool(shape.batch_rows, shape.partitions)
    for i in range(start, shape.batches if stop is None else min(stop, shape.batches)):
        yield pool.batch(i)


def schema(shape: StreamShape) -> pa.Schema:
    return make_batch(0, 1, shape.partitions).schema


def dask_partition(index: int, shape: StreamShape) -> Any:
    """Dask partition `index`: its run of the stream's batches, as pandas."""
    first = index * shape.dask_partition_batches
    parts = list(batches(shape, first, first + shape.dask_partition_batches))
    return pa.Table.from_batches(parts, schema=schema(shape)).to_pandas()


# --- the writers, each given (shape, dest, options) after its setup --------------------------


def _dataferry(shape: StreamShape, dest: str, options: dict[str, Any]) -> Any:
    from ..dataset.write import write_dataset

    extra = dataferry_keywords(max_memory=options.get("max_memory"))
    result = write_dataset(batches(shape), dest, partition_by=[PARTITION_COLUMN], **extra)
    return f"committer {result.committer}{stream_cost(result.stats)}"


def stream_cost(stats: dict[str, Any]) -> str:
    """What dataferry's stream design cost, for the note column: tasks (segments), the local
    spill written and read back (bytes, seconds), and how long the producer was held back."""
    if "spill_bytes" not in stats:
        return ""
    if stats.get("spilled") is False:
        return (
            f"; {stats['segments']} task(s); straight through, no spill; "
            f"producer waited {stats['producer_wait_s']:.2f} s"
        )
    return (
        f"; {stats['segments']} task(s); spill {stats['spill_bytes'] / (1 << 20):,.0f} MiB "
        f"written {stats['spill_write_s']:.2f} s, read {stats['spill_read_s']:.2f} s; "
        f"producer waited {stats['producer_wait_s']:.2f} s"
    )


def _pyarrow(shape: StreamShape, dest: str, options: dict[str, Any]) -> Any:
    import pyarrow.dataset as pads

    reader = pa.RecordBatchReader.from_batches(schema(shape), batches(shape))
    pads.write_dataset(
        reader,
        dest,
        format="parquet",
        partitioning=[PARTITION_COLUMN],
        partitioning_flavor="hive",
        existing_data_behavior="overwrite_or_ignore",
    )


def _duckdb(shape: StreamShape, dest: str, options: dict[str, Any]) -> Any:
    import duckdb

    con = duckdb.connect()
    con.register("stream", pa.RecordBatchReader.from_batches(schema(shape), batches(shape)))
    con.execute(duckdb_copy("stream", dest, (PARTITION_COLUMN,)))
    con.close()


def _deltalake(shape: StreamShape, dest: str, options: dict[str, Any]) -> Any:
    from deltalake import write_deltalake

    reader = pa.RecordBatchReader.from_batches(schema(shape), batches(shape))
    write_deltalake(dest, reader, partition_by=[PARTITION_COLUMN])


def _generate_only(shape: StreamShape, dest: str, options: dict[str, Any]) -> Any:
    """The floor: the stream generated and dropped, nothing written. Every writer pays this
    (the generator runs on one thread), so no writer can take less time than it."""
    rows = sum(b.num_rows for b in batches(shape))
    return f"{rows:,} rows generated, none written"


def _dask_frame(shape: StreamShape) -> Any:
    import dask.dataframe as dd

    meta = pa.Table.from_batches([], schema=schema(shape)).to_pandas()
    return dd.from_map(dask_partition, range(shape.dask_partitions), shape=shape, meta=meta)


def _dask(shape: StreamShape, dest: str, options: dict[str, Any]) -> Any:
    dask_to_parquet((PARTITION_COLUMN,))(_dask_frame(shape), dest)


def _dataferry_dask(shape: StreamShape, dest: str, options: dict[str, Any]) -> Any:
    import dataferry.dask as ferry

    result = ferry.to_parquet(_dask_frame(shape), dest, partition_on=[PARTITION_COLUMN])
    committer = getattr(result, "committer", None)
    return f"committer {committer}" if isinstance(committer, str) else None


@dataclass(frozen=True)
class StreamWriter:
    name: str
    modules: tuple[str, ...]  # needed: the writer is skipped without them
    write: Callable[[StreamShape, str, dict[str, Any]], Any]
    warm: tuple[str, ...] = ()  # imported before the clock starts
    cluster: bool = False  # runs on a Dask LocalCluster started in its process
    delta: bool = False
    floor: bool = False  # writes nothing: the stream's own cost, not a writer


_DASK = ("dask.dataframe", "distributed")
STREAM_WRITERS = {
    w.name: w
    for w in (
        StreamWriter("dataferry", (), _dataferry, warm=FERRY_MODULES),
        StreamWriter("pyarrow", (), _pyarrow, warm=("pyarrow.dataset",)),
        StreamWriter("generate only", (), _generate_only, floor=True),
        StreamWriter("duckdb", ("duckdb",), _duckdb),
        StreamWriter("deltalake", ("deltalake",), _deltalake, delta=True),
        StreamWriter("dask", _DASK, _dask, warm=DASK_MODULES, cluster=True),
        StreamWriter(
            "dataferry.dask",
            _DASK,
            _dataferry_dask,
            warm=(*DASK_MODULES, *FERRY_MODULES, "dataferry.dask"),
            cluster=True,
        ),
    )
}


def peak_rss_bytes() -> int:
    """The high-water mark of this process's RSS: VmHWM where /proc has it. (Not ru_maxrss:
    on Linux it keeps the parent's peak across fork and exec, so a process started by a large
    parent reports the parent's peak.)"""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib if sys.platform == "darwin" else kib * 1024  # bytes on macOS, KiB on Linux


class ChildSampler(threading.Thread):
    """The largest total RSS of this process's descendants, sampled with psutil every
    `interval` s while the write runs (0 when it starts none)."""

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(daemon=True, name="bench-rss-sampler")
        self.interval = interval
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while True:
            total = 0
            for p in me.children(recursive=True):
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            if self.done.wait(self.interval):
                return

    def stop(self) -> int:
        self.done.set()
        self.join()
        return self.peak


def run_child(args: dict[str, Any]) -> dict[str, Any]:
    """Set up, then time one write; what the parent reads from stdout."""
    writer = STREAM_WRITERS[args["writer"]]
    shape = StreamShape(**args["shape"])
    for module in (*writer.modules, *writer.warm):
        importlib.import_module(module)
    batch_pool(shape.batch_rows, shape.partitions)  # generated before the clock starts
    sampler = ChildSampler() if importlib.util.find_spec("psutil") else None
    with _cluster(writer.cluster, args.get("workers", 2)):
        rss_start = peak_rss_bytes()
        if sampler:
            sampler.start()
        started = time.perf_counter()
        try:
            detail = writer.write(shape, args["dest"], args.get("options", {}))
            wall = time.perf_counter() - started
        finally:
            children = sampler.stop() if sampler else None
        rss_self = peak_rss_bytes()
    return {
        "writer": writer.name,
        "wall_s": wall,
        "rss_start_bytes": rss_start,
        "rss_self_bytes": rss_self,
        "rss_children_bytes": children,
        "detail": detail,
        "shape": asdict(shape),
    }


@contextmanager
def _cluster(wanted: bool, workers: int) -> Iterator[None]:
    """A LocalCluster in this process (processes=False: its workers' memory is this process's),
    the default client while the write runs; nothing when not wanted."""
    if not wanted:
        yield
        return
    import dask
    import distributed

    with (
        dask.config.set({"distributed.worker.memory.target": False}),
        distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        yield


def main(argv: list[str]) -> int:
    result = run_child(json.loads(argv[1]))
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
