"""The shuffle's map and reduce tasks, picklable, for any engine that runs them.

A map task splits its table into blocks (`codec.py`), writes the map output to its node's
shuffle directory and, with push on, hands the blocks to its process's pusher (or, with
`PushConfig.background` off, pushes them to the mergers before it returns). A reduce task
reads its blocks (merged chunks plus originals, or only originals for a pull-based shuffle)
and decodes them into one table. Both record the durations of their stages in their stats.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from ...shuffle import (
    MapStatus,
    PushTarget,
    ReduceInput,
    push_map_output,
    read_reduce,
    write_map_output,
)
from ...shuffle.background import process_pusher
from ...shuffle.blocks import Pieces
from ...shuffle.mapoutput import block_sizes
from ...stats import IOStatistics
from ...store import open_store
from .codec import as_table, decode_blocks, encode_blocks, split_batches

TableSource = Callable[[], Any]  # returns a pyarrow Table or a pandas DataFrame


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
    stats = IOStatistics()  # durations of the task's stages: map_split, map_write, map_push
    table = as_table(task.source() if data is None else data)
    with stats.duration("map_split"):  # hash, order and encode the blocks
        payloads = encode_blocks(split_batches(table, task.on, task.num_reduces))
    store = open_store(task.node_dir)
    # the encoded blocks are kept for the pusher only when some merger needs their bytes: one
    # that reads them from the map output itself leaves them to be freed (and their memory
    # reused by the next map) now
    pushes_bytes = task.target is not None and not task.target.by_reference_only(task.location)
    framed: list[Pieces] | None = [] if pushes_bytes else None
    with stats.duration("map_write"):
        offsets = write_map_output(
            store, task.app, task.shuffle_id, task.map_index, task.attempt, payloads, framed
        )
    del payloads
    sizes = block_sizes(offsets)
    push: dict[str, Any] = {}
    with stats.duration("map_push"):
        if task.target is not None and task.target.config.background:
            # handed to this process's pusher: the task returns, its pushes overlap the next map
            process_pusher().submit(
                store, task.target, task.map_index, task.attempt, offsets, framed, task.location
            )
            push = {"background": True}
        elif task.target is not None:
            report = push_map_output(
                store,
                task.target,
                task.map_index,
                task.attempt,
                offsets,
                stats,
                framed,
                location=task.location,
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
    stats = IOStatistics()  # with the durations of reduce_read and reduce_decode
    with stats.duration("reduce_read"):
        blocks, report = read_reduce(inp, stats)
    with stats.duration("reduce_decode"):
        table = decode_blocks(blocks, schema)
    value = reduce_fn(table) if reduce_fn is not None else table
    return ReduceResult(inp.reduce_id, value, asdict(report), stats.snapshot())
