"""Shuffle blocks as Arrow: how a map task splits its table by key and encodes each part.

A map task hash-partitions its table by the key columns (pandas' hash, as Dask's shuffle does,
so both put a key in the same output partition), orders its rows by partition with one Arrow
`take` (a compute kernel that runs without the GIL) and encodes each partition's zero-copy
slice as one Arrow IPC message, one block per reduce partition. A block is a bare record batch
message: every block of a shuffle has the schema the maps report, so the schema is not repeated
in every block (a schema with dictionary columns needs its dictionaries: those blocks are whole
IPC streams). A reduce task decodes its blocks, zero-copy, into one table.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import EngineError
from ...shuffle.blocks import Block

# The buffers a shuffle task makes (the ordered rows, the encoded blocks, the reduce's pandas
# columns) come from the C library's allocator where it keeps freed memory for the next task:
# a task frees and again allocates buffers of the same sizes, one task after another, and
# glibc raises its mmap threshold as large buffers are freed, so it reuses them, while Arrow's
# default mimalloc pool hands them back to the system within milliseconds and each task paid
# a page fault on every page of its buffers again (measured on a 2-core VM: a map's split and
# encode 7 -> 4 ms at 1 GiB in 100 maps, 210-230 -> 125-150 ms at 8 GiB). A process whose
# environment fixes one of glibc's thresholds (Dask's nanny sets MALLOC_TRIM_THRESHOLD_ for
# its workers) keeps the mmap threshold at 128 KiB and maps every larger buffer afresh: there
# mimalloc is the faster (1 GiB on two Dask workers: a map's take 6.5 -> 3.7 ms, the maps'
# split and encode 3.2 -> 2.7 s, the reduces' pandas conversion 1.3 -> 1.0 s, push 4.3 -> 4.0 s).
_GLIBC_FIXED = ("trim_threshold", "mmap_threshold", "top_pad", "mmap_max")


def glibc_reuses_buffers(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether glibc's mmap threshold follows the buffers a process frees: none of the
    settings that fix it is in the environment (`MALLOC_TRIM_THRESHOLD_` and its kin, or
    their `GLIBC_TUNABLES` names)."""
    tunables = environ.get("GLIBC_TUNABLES", "")
    return not any(
        environ.get(f"MALLOC_{name.upper()}_") or f"glibc.malloc.{name}=" in tunables
        for name in _GLIBC_FIXED
    )


POOL = pa.system_memory_pool() if glibc_reuses_buffers() else pa.default_memory_pool()
# glibc maps an allocation past 32 MiB (its largest mmap threshold) afresh every time, so a
# buffer that large gains nothing there; measured slower at 8 GiB (80 MiB maps): those stay
# in Arrow's default pool
REUSED_UP_TO = 32 * 2**20


def pool_for(nbytes: int) -> pa.MemoryPool:
    """The pool for a buffer of about `nbytes` (see POOL)."""
    return POOL if nbytes <= REUSED_UP_TO else pa.default_memory_pool()


def as_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    return from_pandas(data, preserve_index=False)


def from_pandas(df: Any, preserve_index: bool) -> pa.Table:
    """A map's pandas frame as Arrow: `pa.Table.from_pandas(df, preserve_index=...)`, the same
    table, schema and pandas metadata, but without a copy where it can: a frame whose columns
    (and kept index) are plain numpy numbers or booleans under unique string names is converted
    column by column from its numpy arrays, which Arrow wraps in place (measured on 190k rows
    of 8 numeric columns, a 1 GiB shuffle's map: 3.8 ms -> 1.0 ms). The schema and metadata are
    `from_pandas`' own for the frame's empty head (kept per column layout), so a reduce
    restores columns and index alike. The table shares the frame's memory: a map task encodes
    it and lets it go before anything else runs on that frame."""
    import pandas as pd

    names = df.columns
    if isinstance(names, pd.MultiIndex) or not names.is_unique:
        return pa.Table.from_pandas(df, preserve_index=preserve_index)
    index = df.index
    layout = (
        tuple(names),
        tuple(df.dtypes),
        preserve_index,
        (type(index), index.name, index.dtype) if preserve_index else None,
    )
    try:
        schema = _zero_copy_schema(layout, df)
    except TypeError:  # a name or dtype that cannot be a cache key: the general way
        schema = None
    if schema is None:
        return pa.Table.from_pandas(df, preserve_index=preserve_index)
    columns = [df[n].to_numpy() for n in names]
    if preserve_index:
        columns.append(index.to_numpy())
    return pa.Table.from_arrays(
        [_wrap(values, f.type) for values, f in zip(columns, schema, strict=True)],
        schema=schema,
    )


def _wrap(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A numpy column as Arrow, in place; a float column holding NaN gets them as nulls, as
    `from_pandas` gives them (the scan for NaN is the cheap sum, the copy only when needed)."""
    if values.dtype.kind == "f" and not math.isfinite(np.add.reduce(values)):
        return pa.array(values, type=type_, from_pandas=True)
    return pa.array(values, type=type_)


def _plain(dtype: Any) -> bool:
    """A numpy dtype Arrow takes as it is: integers, booleans, 32- and 64-bit floats."""
    return isinstance(dtype, np.dtype) and (
        dtype.kind in "iub" or (dtype.kind == "f" and dtype.itemsize in (4, 8))
    )


_SCHEMAS: dict[tuple[Any, ...], pa.Schema | None] = {}  # a frame layout's schema, or None
_UNKNOWN = object()


def _zero_copy_schema(layout: tuple[Any, ...], df: Any) -> pa.Schema | None:
    """The schema `from_pandas` gives frames of this layout (names, dtypes, whether the
    index is kept and its kind, name and dtype) when their columns can be taken in place,
    else None; worked out once per layout."""
    known = _SCHEMAS.get(layout, _UNKNOWN)  # one lookup: another thread may clear the cache
    if known is not _UNKNOWN:
        return known  # type: ignore[return-value]
    import pandas as pd

    names, dtypes, preserve_index, index = layout
    plain_index = not preserve_index or (
        not issubclass(index[0], pd.MultiIndex) and _plain(index[2]) and index[1] not in names
    )
    schema = None
    if plain_index and all(type(n) is str for n in names) and all(_plain(t) for t in dtypes):
        schema = pa.Schema.from_pandas(df.iloc[:0], preserve_index=preserve_index)
        if len(schema) != len(names) + (1 if preserve_index else 0):
            schema = None
    if len(_SCHEMAS) >= 64:
        _SCHEMAS.clear()
    _SCHEMAS[layout] = schema
    return schema


def _numeric(column: pa.ChunkedArray) -> bool:
    """Whether pandas would hash the column as float64 straight from its values (a numeric or
    boolean column without nulls): then the hash is computed from Arrow's buffers."""
    t = column.type
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)) and (
        column.null_count == 0
    )


class _Scratch(threading.local):
    """A thread's buffers for hashing one map's keys, kept from one map to the next: in a
    process whose environment fixes glibc's thresholds (Dask's nanny does) every numpy
    temporary past 128 KiB is mapped afresh and faulted in page by page, which cost more than
    the hash itself (1 GiB in 100 maps: 281,000 page faults and 1.1 CPU-s of pandas'
    `hash_array`, 0 and 0.16 CPU-s in place here)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, n: int, dtype: Any) -> np.ndarray:
        """An array of n items, reused while it is large enough (and its bytes under
        REUSED_UP_TO; a larger one is not kept)."""
        a = self.arrays.get(name)
        if a is None or len(a) < n or a.dtype != dtype:
            a = np.empty(n, dtype)
            if a.nbytes <= REUSED_UP_TO:
                self.arrays[name] = a
        return a[:n]


_SCRATCH = _Scratch()
_U64 = np.uint64


def _mix_in_place(values: np.ndarray, tmp: np.ndarray) -> None:
    """pandas' `_hash_ndarray` on 64-bit words (`vals ^= vals >> 30` ...), in place."""
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, 0)):
        np.right_shift(values, _U64(shift), out=tmp)
        np.bitwise_xor(values, tmp, out=values)
        if mult:
            np.multiply(values, _U64(mult), out=values)


def _integer_hashes(columns: Sequence[pa.ChunkedArray], n: int) -> np.ndarray:
    """Output partition of every row for integer or boolean keys without nulls: pandas' hash
    of each key as float64 (such keys are never NaN or -0.0, which pandas canonicalizes) and
    `_combine` of them, computed in this thread's scratch buffers (see _Scratch); the result
    is a scratch buffer too, valid until this thread hashes again."""
    rows = len(columns[0])
    row = _SCRATCH.get("row", rows, np.uint64)
    word = _SCRATCH.get("word", rows, np.float64)
    tmp = _SCRATCH.get("tmp", rows, np.uint64)
    row.fill(0x345678)
    mult = _U64(1000003)
    for i, column in enumerate(columns):
        inverse = len(columns) - i
        np.copyto(word, column.to_numpy(), casting="unsafe")
        bits = word.view(np.uint64)
        _mix_in_place(bits, tmp)
        np.bitwise_xor(row, bits, out=row)
        np.multiply(row, mult, out=row)
        mult += _U64(82520 + inverse + inverse)
    np.add(row, _U64(97531), out=row)
    np.remainder(row, _U64(n), out=row)
    ids = _SCRATCH.get("ids", rows, _id_dtype(n))
    np.copyto(ids, row, casting="unsafe")
    return ids


def _id_dtype(n: int) -> Any:
    # small integer types let a sort by partition run as a counting or radix sort
    return np.int16 if n <= 32767 else np.int64


def _combine(hashes: Sequence[np.ndarray]) -> np.ndarray:
    """pandas' combination of per-column hashes into a row hash (`combine_hash_arrays`, the
    rule of CPython's tuple hash), which `hash_pandas_object` applies to a DataFrame."""
    mult = np.uint64(1000003)
    out = np.full(len(hashes[0]), 0x345678, dtype=np.uint64)
    for i, h in enumerate(hashes):
        inverse = len(hashes) - i
        out ^= h
        out *= mult
        mult += np.uint64(82520 + inverse + inverse)
    out += np.uint64(97531)
    return out


def partition_ids(table: pa.Table, on: Sequence[str], n: int) -> np.ndarray:
    """Output partition of every row: pandas' hash of the key columns modulo n, numeric keys
    hashed as float64, which is Dask's rule, so a key lands where `ddf.shuffle` puts it."""
    return _partition_ids(table, on, n).copy()


def _partition_ids(table: pa.Table, on: Sequence[str], n: int) -> np.ndarray:
    """`partition_ids`, possibly in this thread's scratch buffer (used before the next hash).
    Integer and boolean keys without nulls are hashed in place from their Arrow buffers;
    other numeric keys without nulls from them by pandas' `hash_array`; the rest through a
    DataFrame of the keys."""
    import pandas as pd

    columns = [table.column(c) for c in on]
    if all(_numeric(c) and not pa.types.is_floating(c.type) for c in columns):
        return _integer_hashes(columns, n)
    if all(_numeric(c) for c in columns):
        values = [c.to_numpy().astype(np.float64, copy=False) for c in columns]
        hashed = _combine([pd.util.hash_array(v) for v in values])
    else:
        keys = table.select(list(on)).to_pandas()
        numeric = {
            c: np.float64 for c, t in keys.dtypes.items() if pd.api.types.is_numeric_dtype(t)
        }
        if numeric:
            keys = keys.astype(numeric, errors="ignore")
        hashed = pd.util.hash_pandas_object(keys, index=False).to_numpy()
    ids = hashed % np.uint64(n)
    return ids.astype(_id_dtype(n))


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    """The table as one record batch (zero-copy when each column is one chunk): a batch's
    `take` runs several times faster than a chunked table's."""
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def split_batches(table: pa.Table, on: Sequence[str], n: int) -> list[pa.RecordBatch]:
    """The table's rows per output partition: one `take` by the partition-sorted row order,
    then n zero-copy slices (a partition's rows keep their input order). The order is Arrow's
    stable sort of the partition ids (a counting sort for small integers, its indices in
    Arrow's pool: numpy's argsort and its int32 copy were two fresh mappings per map where
    glibc's thresholds are fixed, 0.35 -> 0.1 CPU-s per GiB with the take)."""
    if table.num_rows == 0:
        return [_one_batch(table)] * n
    parts = _partition_ids(table, on, n)
    order = pc.array_sort_indices(pa.array(parts), memory_pool=POOL)
    ordered = pc.take(_one_batch(table), order, memory_pool=pool_for(table.nbytes))
    counts = np.bincount(parts, minlength=n)
    del order, parts  # the scratch ids may be reused from here on
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [ordered.slice(int(bounds[i]), int(counts[i])) for i in range(n)]


def split_table(table: pa.Table, on: Sequence[str], n: int) -> list[pa.Table]:
    """The table's rows per output partition, as tables (see `split_batches`)."""
    return [pa.Table.from_batches([b], table.schema) for b in split_batches(table, on, n)]


def _has_dictionary(schema: pa.Schema) -> bool:
    def dictionary(t: pa.DataType) -> bool:
        if pa.types.is_dictionary(t):
            return True
        return any(dictionary(t.field(i).type) for i in range(t.num_fields))

    return any(dictionary(f.type) for f in schema)


def encode_block(data: pa.RecordBatch | pa.Table) -> memoryview:
    """One reduce partition's rows as one Arrow IPC message, in the buffer Arrow wrote it to
    (written to the map output and pushed from there, never copied into Python bytes): a
    record batch message, or a whole stream when the schema has dictionaries."""
    return _encode(data, _has_dictionary(data.schema))


def encode_blocks(batches: Sequence[pa.RecordBatch]) -> list[memoryview]:
    """`encode_block` of each partition's batch (one schema: looked at once)."""
    if not batches:
        return []
    stream = _has_dictionary(batches[0].schema)
    return [_encode(b, stream) for b in batches]


def _encode(data: pa.RecordBatch | pa.Table, stream: bool) -> memoryview:
    if data.num_rows == 0:
        return memoryview(b"")
    if not stream:
        batch = data if isinstance(data, pa.RecordBatch) else _one_batch(data)
        return memoryview(batch.serialize(memory_pool=POOL))
    sink = pa.BufferOutputStream(memory_pool=POOL)
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write(data)
    return memoryview(sink.getvalue())


def decode_blocks(blocks: Sequence[Block], schema: pa.Schema | None = None) -> pa.Table:
    """A reduce partition's blocks as one table, its columns chunked by block (nothing is
    copied: the batches are views of the bytes read)."""
    if not blocks:
        if schema is None:
            raise EngineError("no blocks and no schema: cannot build an empty table")
        return schema.empty_table()
    if schema is None:
        raise EngineError("decoding shuffle blocks needs the maps' schema")
    if _has_dictionary(schema):
        tables = [pa.ipc.open_stream(pa.py_buffer(b.payload)).read_all() for b in blocks]
        return pa.concat_tables(tables)
    batches = [pa.ipc.read_record_batch(pa.py_buffer(b.payload), schema) for b in blocks]
    return pa.Table.from_batches(batches, schema)


def shuffle_schema(maps: Sequence[tuple[pa.Schema, bool]]) -> pa.Schema:
    """The schema every block of a shuffle is decoded with, from each map's (schema, whether it
    wrote any block): the maps that wrote blocks must agree on it (their pandas metadata
    aside), as their blocks carry no schema of their own; a map without rows is not asked."""
    if not maps:
        raise EngineError("a shuffle without maps has no schema")
    written = [s for s, wrote in maps if wrote]
    for s in written[1:]:
        if not s.equals(written[0], check_metadata=False):
            raise EngineError(f"shuffle maps disagree on their schema: {written[0]} against {s}")
    return written[0] if written else maps[0][0]


# The pool of a reduce's pandas columns: the C library's. They are the caller's frame, kept
# (Dask persists them), so no pool reuses them; where glibc's thresholds are fixed (Dask's
# workers) it maps each column on its own, in small pages, while mimalloc carves them from
# arenas the kernel backs with transparent huge pages, each zeroed whole when first touched:
# measured on the 2-core VM (THP "always", MALLOC_TRIM_THRESHOLD_ set), 100 reduces of a 1
# GiB shuffle held, 0.70-2.49 CPU-s from mimalloc against 0.44-0.51 from glibc (0.67-0.71
# with mimalloc and huge pages turned off).
OUTPUT_POOL = pa.system_memory_pool()


def to_pandas(table: pa.Table) -> Any:
    """A reduce's table as pandas, the index back from the schema's pandas metadata: each
    column converted into its own array from OUTPUT_POOL (a 2-D block per dtype would be
    one allocation past glibc's reuse limit at a few million rows, faulted in afresh every
    reduce: 8 GiB shuffles took 20% longer so), and the table's buffers released as their
    column is converted (the table is not used after). Arrow's own threads would only contend
    with the other workers' on the same host."""
    return table.to_pandas(
        use_threads=False, split_blocks=True, self_destruct=True, memory_pool=OUTPUT_POOL
    )
