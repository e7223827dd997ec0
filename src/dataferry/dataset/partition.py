"""Hive-style partitioning of a table: `col=value/` directories.

Values are escaped as Hive escapes them (%XX for path-special characters) and nulls go to
`__HIVE_DEFAULT_PARTITION__`, so Hive, Spark, Trino and pyarrow's hive partitioning read the
directories back to the same values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_RADIX_LIMIT = 1 << 16
_COMPACT_LIMIT = 1 << 31
_PARALLEL_ROWS = 200_000
_ESCAPE = set("\"#%'*/:=?\\\x7f{[]^")


def escape_value(value: object) -> str:
    if value is None:
        return NULL_PARTITION
    text = str(value)
    if text == "":
        return NULL_PARTITION
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE or ord(c) < 0x20 else c for c in text)


def partition_dir(columns: Sequence[str], values: Sequence[object]) -> str:
    return "/".join(f"{c}={escape_value(v)}" for c, v in zip(columns, values, strict=True))


@dataclass(frozen=True)
class Rows:
    """Rows of `data` at `indices`, gathered only when written (so the gathering runs in
    the write tasks, in parallel, not once on the driver)."""

    data: pa.Table
    indices: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.indices)

    def slice(self, offset: int, length: int | None = None) -> Rows:
        end = None if length is None else offset + length
        return Rows(self.data, self.indices[offset:end])

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
    table = data.take(pa.array(np.concatenate([r.indices for r in lazy])))
    out: list[tuple[str, pa.Table]] = []
    offset = 0
    for directory, rows in pieces:
        if isinstance(rows, Rows):
            out.append((directory, table.slice(offset, rows.num_rows)))
            offset += rows.num_rows
        else:
            out.append((directory, rows))
    return out


def partition_rows(table: pa.Table, columns: Sequence[str]) -> list[tuple[str, Rows]]:
    """(partition directory, its rows without the partition columns) for each partition, in
    one sort of the whole table; the rows are gathered later (`Rows.gather`)."""
    _check_columns(table, columns)
    if table.num_rows == 0:
        return []
    order, starts, ends = _partition_order(table, columns)
    data = table.drop_columns(list(columns))
    return [
        (_directory(table, columns, int(order[s])), Rows(data, order[s:e]))
        for s, e in zip(starts, ends, strict=True)
    ]


def split_by_partition(table: pa.Table, columns: Sequence[str]) -> Iterator[tuple[str, pa.Table]]:
    """Yield (partition directory, rows without the partition columns) for each partition."""
    if not columns:
        yield "", table
        return
    _check_columns(table, columns)
    if table.num_rows == 0:
        return
    order, starts, ends = _partition_order(table, columns)
    # one gather into partition order, then zero-copy slices (not one gather per partition)
    data = table.drop_columns(list(columns)).take(pa.array(order))
    for s, e in zip(starts, ends, strict=True):
        yield _directory(table, columns, int(order[s])), data.slice(int(s), int(e - s))


def _check_columns(table: pa.Table, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ConfigError(
            f"partition column {missing[0]!r} is not in the data; columns: "
            f"{', '.join(table.column_names)}"
        )


def _directory(table: pa.Table, columns: Sequence[str], row: int) -> str:
    first = table.select(list(columns)).slice(row, 1).to_pylist()[0]
    return partition_dir(columns, [first[c] for c in columns])


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """(a code per row, number of codes); a null is a value of its own."""
    if pa.types.is_dictionary(column.type):
        # already encoded (pandas and polars categoricals), but its nulls have no code and its
        # chunks may have different dictionaries: encode the values again
        column = column.cast(column.type.value_type)
    enc = pc.dictionary_encode(column, null_encoding="encode").combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(enc.dictionary)


def _partition_order(
    table: pa.Table, columns: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row order grouping the partitions, start and end of each partition in that order)."""
    cols = [table.column(c) for c in columns]
    if len(cols) > 1 and table.num_rows >= _PARALLEL_ROWS:
        # pyarrow releases the GIL while it hashes: the columns are encoded side by side
        with ThreadPoolExecutor(len(cols)) as pool:
            codes = list(pool.map(_codes, cols))
    else:
        codes = [_codes(c) for c in cols]
    key = np.zeros(table.num_rows, dtype=np.int64)
    combinations = 1
    for idx, size in codes:
        key = key * size + idx
        combinations *= size
        if combinations > _COMPACT_LIMIT:
            # renumber the combinations that occur, so many columns cannot overflow the key
            _, key = np.unique(key, return_inverse=True)
            combinations = int(key.max()) + 1
    if combinations <= _RADIX_LIMIT:
        # numpy's stable sort of 16-bit keys is a radix sort: linear, ten times faster than
        # the merge sort of 64-bit keys, and the usual case (few partitions per task)
        key = key.astype(np.uint16)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    bounds = np.flatnonzero(np.diff(sorted_key)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(order)]))
    return order, starts, ends
