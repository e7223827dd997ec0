"""Planning an in-memory write: how many tasks, and which rows each one writes.

Files are cut from the data, not from the core count. Stages:

1. `split_partitions`: the table's rows grouped by partition (row slices numbered and
   sorted side by side; the rows are gathered later, by the tasks).
2. `measure`: bytes per row in memory, and the ratio of written to in-memory bytes, learnt
   by writing a sample of the rows in the chosen format and options.
3. `cut_files`: each partition cut into pieces of at most one file's worth (the target file
   size, as written), and no smaller than a task needs to be worth running on its own.
4. `pack_tasks`: pieces packed in partition order into tasks of equal size (a partition is
   cut at a task's boundary), so small partitions share a task, each task writes one file per
   partition it touches, and no worker waits on another at the end.

Every stage adds its figures to the plan's statistics. The stages are of the stage base
(durations under `write_stage_<name>`), logged at DEBUG on the `dataferry.dataset` logger;
the plan's outcome is one INFO line.
"""

from __future__ import annotations

import contextlib
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import ConfigError
from ..stages import StageRun, stage
from .formats import choose_dictionary, encoded_size
from .options import MiB, WriteOptions
from .partition import NameLimits, partition_rows
from .rows import Rows

MIN_TASK_BYTES = 16 * MiB  # in memory: below this, another task costs more than it saves
SAMPLE_ROWS = 32_768
# from this many rows, the sample is measured beside the split (a thread costs ~0.1 ms)
SIDE_MEASURE_ROWS = 200_000

Piece = tuple[str, pa.Table | Rows]

log = logging.getLogger("dataferry.dataset")


@dataclass
class WritePlan:
    """The tasks of a write (each a list of (partition directory, rows)) and how they came."""

    tasks: list[list[Piece]]
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class SizingRun(StageRun):
    """The stages of one plan, and the figures they found (the plan's `stats`)."""

    figures: dict[str, Any] = field(default_factory=dict)


def plan_tasks(
    table: pa.Table,
    partition_by: tuple[str, ...],
    options: WriteOptions,
    workers: int,
    tasks: int | None = None,
    limits: NameLimits | None = None,
) -> WritePlan:
    """The tasks that write `table`: `tasks` equal row ranges if given, else sized by data.
    A partition directory the destination cannot hold (`limits`) is a ConfigError, raised
    here on the driver before any task runs."""
    if tasks is not None and (isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1):
        raise ConfigError(f"tasks must be an integer >= 1, got {tasks!r}")
    run = SizingRun(logger=log, label="write plan")
    run.figures.update(rows=table.num_rows, workers=workers)
    with contextlib.ExitStack() as side:
        measured = None
        if tasks is None and workers > 1 and table.num_rows >= SIDE_MEASURE_ROWS:
            # the sample encodes on a thread of its own while the split runs (pyarrow
            # releases the GIL): its milliseconds fill the split's uneven end, not the
            # time before any task starts
            pool = side.enter_context(ThreadPoolExecutor(1, "dataferry-measure"))
            measured = pool.submit(measure, run, table, partition_by, options)
        pieces = split_partitions(
            run,
            table,
            partition_by,
            limits,
            options.keep_partition_columns,
            options.keep_empty_partition_values,
            threads=workers,
        )
        if tasks is None:
            row_bytes, ratio = (
                measured.result()
                if measured is not None
                else measure(run, table, partition_by, options)
            )
    if tasks is not None:
        planned = equal_row_ranges(run, pieces, tasks)
    else:
        chunk = cut_size(run, table.num_rows * row_bytes, ratio, options, workers)
        planned = pack_tasks(run, cut_files(run, pieces, row_bytes, chunk), row_bytes, chunk)
    run.figures["tasks"] = len(planned)
    run.figures["plan_s"] = {k: round(v, 4) for k, v in run.seconds().items()}
    log.info(
        "write plan: %d rows in %d partitions, %d tasks (%.3f s)",
        table.num_rows,
        run.figures["partitions"],
        len(planned),
        run.seconds()["total"],
    )
    return WritePlan(planned or [[]], run.figures)


@stage("write_stage_split_partitions", "split_partitions", level=logging.DEBUG)
def split_partitions(
    run: SizingRun,
    table: pa.Table,
    partition_by: tuple[str, ...],
    limits: NameLimits | None = None,
    keep: bool = False,
    keep_empty: bool = False,
    threads: int = 1,
) -> list[Piece]:
    """Stage 1: the table's rows by partition directory (numbered by partition and sorted
    on row slices side by side, `threads` of them, one per worker, when the table is large)."""
    if partition_by:
        pieces: list[Piece] = list(
            partition_rows(table, partition_by, limits, keep, keep_empty, threads)
        )
    else:
        pieces = [("", table)] if table.num_rows else []
    run.figures["partitions"] = len(pieces)
    return pieces


@stage("write_stage_measure", "measure", level=logging.DEBUG)
def measure(
    run: SizingRun, table: pa.Table, partition_by: tuple[str, ...], options: WriteOptions
) -> tuple[float, float]:
    """Stage 2: (in-memory bytes per row, written bytes per in-memory byte)."""
    data = table.drop_columns(list(partition_by)) if partition_by else table
    row_bytes = data.nbytes / data.num_rows if data.num_rows else 0.0
    ratio = 1.0
    if data.nbytes > options.target_file_size // 4:
        # only a write that may pass the target needs to know how the format shrinks it
        sample = data.slice(0, SAMPLE_ROWS)
        if sample.nbytes:
            # encoded as the tasks will encode it (the encodings they choose from such rows)
            chosen = choose_dictionary(options, [sample])
            ratio = max(encoded_size(sample, chosen) / sample.nbytes, 1e-3)
    run.figures.update(row_bytes=round(row_bytes, 1), encoded_ratio=round(ratio, 3))
    return row_bytes, ratio


def cut_size(
    run: SizingRun, total_bytes: float, ratio: float, options: WriteOptions, workers: int
) -> float:
    """In-memory bytes of one piece: a file's worth at most; smaller when the data would
    otherwise leave workers idle, but never under MIN_TASK_BYTES."""
    file_bytes = options.target_file_size / ratio
    spread = max(MIN_TASK_BYTES, total_bytes / max(1, workers))
    chunk = max(1.0, min(file_bytes, spread))
    run.figures.update(in_memory_bytes=int(total_bytes), piece_bytes=int(chunk))
    return chunk


@stage("write_stage_cut_files", "cut_files", level=logging.DEBUG)
def cut_files(run: SizingRun, pieces: list[Piece], row_bytes: float, chunk: float) -> list[Piece]:
    """Stage 3: each partition cut into pieces of at most `chunk` in-memory bytes."""
    cut: list[Piece] = []
    for directory, rows in pieces:
        n = max(1, math.ceil(rows.num_rows * row_bytes / chunk)) if row_bytes else 1
        size = math.ceil(rows.num_rows / n)
        cut.extend((directory, rows.slice(i * size, size)) for i in range(n))
    run.figures["pieces"] = len(cut)
    return cut


@stage("write_stage_pack_tasks", "pack_tasks", level=logging.DEBUG)
def pack_tasks(
    run: SizingRun, pieces: list[Piece], row_bytes: float, chunk: float
) -> list[list[Piece]]:
    """Stage 4: pieces in partition order into tasks of equal size: a piece that would pass
    its task's share is cut at the share (one more file), unless little of the share is left."""
    total = sum(rows.num_rows for _, rows in pieces) * row_bytes
    n = max(1, math.ceil(total / chunk - 1e-9)) if row_bytes else 1
    share = total / n
    tasks: list[list[Piece]] = [[]]
    room = share
    for directory, rows in pieces:
        while rows.num_rows:
            size = rows.num_rows * row_bytes
            last = len(tasks) == n
            if size <= room * 1.05 or last:
                tasks[-1].append((directory, rows))
                room -= size
                break
            if room >= share / 8:
                take = max(1, int(room / row_bytes))
                tasks[-1].append((directory, rows.slice(0, take)))
                rows = rows.slice(take)
            tasks.append([])
            room = share
    run.figures["task_bytes"] = int(share)
    return [t for t in tasks if t]


@stage("write_stage_equal_row_ranges", "equal_row_ranges", level=logging.DEBUG)
def equal_row_ranges(run: SizingRun, pieces: list[Piece], n: int) -> list[list[Piece]]:
    """Instead of stages 2-4, with `tasks=n`: `n` tasks of (nearly) equal rows."""
    return _equal_row_ranges(pieces, n)


def _equal_row_ranges(pieces: list[Piece], n: int) -> list[list[Piece]]:
    """`n` tasks of (nearly) equal rows, cut across partitions in partition order."""
    total = sum(p.num_rows for _, p in pieces)
    per = max(1, math.ceil(total / n))
    tasks: list[list[Piece]] = [[] for _ in range(min(n, max(1, math.ceil(total / per))))]
    t, room = 0, per
    for directory, rows in pieces:
        while rows.num_rows:
            take = min(room, rows.num_rows)
            tasks[t].append((directory, rows.slice(0, take)))
            rows = rows.slice(take)
            room -= take
            if room == 0:
                t += 1
                room = per if t + 1 < len(tasks) else total  # the last task takes the rest
                t = min(t, len(tasks) - 1)
    return tasks
