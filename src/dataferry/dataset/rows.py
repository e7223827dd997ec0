"""Rows of a table in partition order, copied out only by the tasks that write them.

The driver's split by partition (`partition.py`) leaves each row slice's rows sorted by
partition as a run of an `Order`; a task's pieces (`Rows`: a range of that order) are gathered
by the task itself (`gather_pieces`), so the copying runs in the tasks, side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class Order:
    """A table's row numbers in partition order, kept as runs: each row slice's rows
    (numbered from the slice's first row, `offsets`) sorted by partition on the slice's own
    thread, and the segments (one partition's rows in one slice) in the order they follow
    one another. Only the tasks that write rows copy theirs out (`fill`), side by side: the
    driver neither merges the runs nor sorts all the rows at once."""

    runs: tuple[np.ndarray, ...]
    offsets: tuple[int, ...]
    run_of: np.ndarray  # each segment's run, in order
    run_start: np.ndarray  # where each segment starts in its run
    starts: np.ndarray  # where each segment starts in the whole order; the total last

    @staticmethod
    def whole(order: np.ndarray) -> Order:
        """One run: the order as it is."""
        return Order(
            (order,),
            (0,),
            np.zeros(1, np.int64),
            np.zeros(1, np.int64),
            np.array([0, len(order)], dtype=np.int64),
        )

    def __len__(self) -> int:
        return int(self.starts[-1])

    def take(self, start: int, stop: int) -> np.ndarray:
        """Row numbers `start:stop` of the order (a view when it is one run)."""
        if len(self.runs) == 1 and self.offsets[0] == 0:
            return self.runs[0][start:stop]
        out = np.empty(max(0, stop - start), dtype=np.int64)
        self.fill(start, stop, out)
        return out

    def fill(self, start: int, stop: int, out: np.ndarray) -> None:
        """Row numbers `start:stop` of the order into `out` (the table's row numbers: each
        run's own plus its slice's first row)."""
        k = int(np.searchsorted(self.starts, start, "right")) - 1
        pos = start
        while pos < stop:
            end = min(stop, int(self.starts[k + 1]))
            run, first = int(self.run_of[k]), int(self.run_start[k]) - int(self.starts[k])
            np.add(
                self.runs[run][first + pos : first + end],
                self.offsets[run],
                out=out[pos - start : end - start],
            )
            pos, k = max(pos, end), k + 1


@dataclass(frozen=True)
class Rows:
    """Rows `start:stop` of `order` in `data`, gathered only when written (so the gathering
    runs in the write tasks, in parallel, not once on the driver)."""

    data: pa.Table
    order: Order
    start: int
    stop: int

    @property
    def num_rows(self) -> int:
        return self.stop - self.start

    @property
    def indices(self) -> np.ndarray:
        return self.order.take(self.start, self.stop)

    def slice(self, offset: int, length: int | None = None) -> Rows:
        start = min(self.stop, self.start + offset)
        stop = self.stop if length is None else max(start, min(self.stop, start + length))
        return Rows(self.data, self.order, start, stop)

    def gather(self) -> pa.Table:
        return self.data.take(pa.array(self.indices))


def gather_pieces(pieces: Sequence[tuple[str, pa.Table | Rows]]) -> list[tuple[str, pa.Table]]:
    """Tables for a task's pieces: one gather for all their rows (a few large takes are
    cheaper than many small ones), then zero-copy slices."""
    lazy = [r for _, r in pieces if isinstance(r, Rows)]
    if not lazy:
        return list(pieces)  # type: ignore[arg-type]
    data = lazy[0].data
    if any(r.data is not data for r in lazy):
        raise ValueError("pieces of one task must come from one table")
    indices = np.empty(sum(r.num_rows for r in lazy), dtype=np.int64)
    offset = 0
    for r in lazy:
        r.order.fill(r.start, r.stop, indices[offset : offset + r.num_rows])
        offset += r.num_rows
    table = data.take(pa.array(indices))
    out: list[tuple[str, pa.Table]] = []
    offset = 0
    for directory, rows in pieces:
        if isinstance(rows, Rows):
            out.append((directory, table.slice(offset, rows.num_rows)))
            offset += rows.num_rows
        else:
            out.append((directory, rows))
    return out
