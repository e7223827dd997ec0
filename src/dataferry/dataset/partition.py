"""Hive-style partitioning of a table: `col=value/` directories.

Values are escaped as Hive escapes them (%XX for path-special characters) and nulls go to
`__HIVE_DEFAULT_PARTITION__`, so Hive, Spark, Trino and pyarrow's hive partitioning read the
directories back to the same values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_RADIX_LIMIT = 1 << 16
_COMPACT_LIMIT = 1 << 31
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


def split_by_partition(table: pa.Table, columns: Sequence[str]) -> Iterator[tuple[str, pa.Table]]:
    """Yield (partition directory, rows without the partition columns) for each partition."""
    if not columns:
        yield "", table
        return
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ConfigError(
            f"partition column {missing[0]!r} is not in the data; columns: "
            f"{', '.join(table.column_names)}"
        )
    if table.num_rows == 0:
        return
    key = np.zeros(table.num_rows, dtype=np.int64)
    combinations = 1
    for c in columns:
        enc = pc.dictionary_encode(table.column(c), null_encoding="encode").combine_chunks()
        idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        key = key * len(enc.dictionary) + idx
        combinations *= len(enc.dictionary)
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
    part_values = table.select(list(columns))
    # one gather into partition order, then zero-copy slices (not one gather per partition)
    data = table.drop_columns(list(columns)).take(pa.array(order))
    for s, e in zip(starts, ends, strict=True):
        first = part_values.slice(int(order[s]), 1).to_pylist()[0]
        yield partition_dir(columns, [first[c] for c in columns]), data.slice(int(s), int(e - s))
