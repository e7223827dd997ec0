"""Shuffle blocks as Arrow: how a map task splits its table by key and encodes each part.

A map task hash-partitions its table by the key columns (pandas' hash, as Dask's shuffle does,
so both put a key in the same output partition) and encodes each part as an Arrow IPC stream,
one block per reduce partition; a reduce task decodes its blocks into one table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import EngineError
from ...shuffle.blocks import Block


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
    if table.num_rows < 2**31:
        order = order.astype(np.int32)  # Arrow's take runs several times faster on int32
    ordered = table.take(pa.array(order))
    counts = np.bincount(parts, minlength=n)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [ordered.slice(int(bounds[i]), int(counts[i])) for i in range(n)]


def encode_block(table: pa.Table) -> memoryview:
    """One reduce partition's rows as an Arrow IPC stream, in the buffer Arrow wrote it to
    (written to the map output and pushed from there, never copied into Python bytes)."""
    if table.num_rows == 0:
        return memoryview(b"")
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return memoryview(sink.getvalue())


def decode_blocks(blocks: Sequence[Block], schema: pa.Schema | None = None) -> pa.Table:
    tables = [pa.ipc.open_stream(pa.py_buffer(b.payload)).read_all() for b in blocks]
    if not tables:
        if schema is None:
            raise EngineError("no blocks and no schema: cannot build an empty table")
        return schema.empty_table()
    return pa.concat_tables(tables)
