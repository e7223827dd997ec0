"""Hive-style partitioning of a table: `col=value/` directories.

Values are escaped as Hive escapes them (%XX for path-special characters) and nulls go to
`__HIVE_DEFAULT_PARTITION__`, so Hive, Spark, Trino and pyarrow's hive partitioning read the
directories back to the same values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from ..store import paths
from .rows import Order, Rows

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_RADIX_LIMIT = 1 << 16
_COMPACT_LIMIT = 1 << 31
_PARALLEL_ROWS = 200_000
# row slices a thread numbers and sorts, one after the other: with more slices than threads,
# a thread that finishes its first slice early (the other descheduled, or slower) takes the
# next, so the split does not wait on its slowest thread's one large slice
SLICES_PER_THREAD = 2
_ESCAPE = set("\"#%'*/:=?\\\x7f{[]^")


# A `col=value` directory must be a name the destination can hold. The rule is conservative
# and the same on every store: at most 255 bytes (UTF-8) per name, the limit of local file
# systems (NAME_MAX), of HDFS (dfs.namenode.fs-limits.max-component-length) and of ABFS path
# segments. Stores without directories (no atomic directory rename: S3, GCS, memory) hold
# keys of at most 1024 bytes in all, so there the partition directories may have what is
# left of that after the destination's own key prefix and room for the committer's prefix
# and the file name (KEY_RESERVE).
NAME_LIMIT = paths.NAME_LIMIT
KEY_LIMIT = 1024
KEY_RESERVE = 256


@dataclass(frozen=True)
class NameLimits:
    """How long partition directory names may be on a destination (see NAME_LIMIT)."""

    name: int = NAME_LIMIT  # bytes per `col=value` name
    directory: int | None = None  # bytes of all `col=value/...` together, if bounded
    prefix: int = 0  # bytes of the destination's own key prefix (for the message)


def name_limits(store: Any) -> NameLimits:
    """The limits for a destination store: names only on a file system; names and the
    whole key on an object store."""
    if store.capabilities.atomic_dir_rename:
        return NameLimits()
    url = str(store.url)
    prefix = len(url.rsplit("://", 1)[-1].partition("/")[2].encode("utf-8", "replace"))
    return NameLimits(directory=max(0, KEY_LIMIT - KEY_RESERVE - prefix - 1), prefix=prefix)


_DEFAULT_LIMITS = NameLimits()


def _shorten(text: str, keep: int = 48) -> str:
    if len(text) <= keep + 12:
        return repr(text)
    return f"{text[:keep]!r}...{text[-8:]!r} ({len(text)} characters)"


def check_name(column: str, value: object, name: str, limits: NameLimits) -> None:
    """One ConfigError naming the column, the value (shortened) and the limit when
    `name` (`column=escaped value`) cannot be a directory name on the destination."""
    if "/" in column or "\x00" in column:
        raise ConfigError(
            f"partition column {column!r} cannot be part of a directory name: it holds "
            f"{'/' if '/' in column else 'NUL'}"
        )
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ConfigError(
            f"partition column {column!r}: the value {_shorten(str(value))} cannot be a file "
            f"name: it is not valid Unicode ({e.reason} at character {e.start})"
        ) from None
    if size > limits.name:
        raise ConfigError(
            f"partition column {column!r}: the value {_shorten(str(value))} makes a directory "
            f"name of {size} bytes ({column}=<escaped value>), more than the {limits.name} "
            "bytes a file or directory name may have (local file systems, HDFS and ABFS "
            "allow 255 bytes per name)"
        )


def check_directory(
    columns: Sequence[str], values: Sequence[object], directory: str, limits: NameLimits
) -> None:
    """One ConfigError when the whole partition directory is too long for the store's keys,
    naming the column with the longest value."""
    if limits.directory is None:
        return
    size = len(directory.encode("utf-8"))
    if size <= limits.directory:
        return
    names = directory.split("/")
    longest = max(range(len(names)), key=lambda i: len(names[i].encode("utf-8")))
    raise ConfigError(
        f"partition column {columns[longest]!r}: the value {_shorten(str(values[longest]))} "
        f"makes a partition directory of {size} bytes, more than the {limits.directory} "
        f"bytes this destination has room for (object store keys hold at most {KEY_LIMIT} "
        f"bytes: {limits.prefix} for the destination's prefix and {KEY_RESERVE} kept for "
        "the committer's prefix and the file name)"
    )


def escape_value(value: object, keep_empty: bool = False) -> str:
    """A value as a directory name's text: Hive's null directory for None, and for '' too
    unless `keep_empty` (a format that keeps '' apart from null: Delta, as deltalake)."""
    if value is None:
        return NULL_PARTITION
    text = str(value)
    if text == "":
        return "" if keep_empty else NULL_PARTITION
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE or ord(c) < 0x20 else c for c in text)


def partition_dir(
    columns: Sequence[str],
    values: Sequence[object],
    limits: NameLimits | None = None,
    keep_empty: bool = False,
) -> str:
    """`c1=v1/c2=v2`, each value escaped; a ConfigError (naming the column and the value)
    when a name would pass the destination's limits (`limits`; default: 255 bytes a name)."""
    limits = limits or _DEFAULT_LIMITS
    names = []
    for c, v in zip(columns, values, strict=True):
        name = f"{c}={escape_value(v, keep_empty)}"
        check_name(c, v, name, limits)
        names.append(name)
    directory = "/".join(names)
    check_directory(columns, values, directory, limits)
    return directory


def partition_rows(
    table: pa.Table,
    columns: Sequence[str],
    limits: NameLimits | None = None,
    keep: bool = False,
    keep_empty: bool = False,
    threads: int = 1,
) -> list[tuple[str, Rows]]:
    """(partition directory, its rows without the partition columns unless `keep`) for each
    partition, in partition order (`_partition_order`: row slices numbered and sorted side
    by side on `threads` threads when the table is large); the rows are gathered later, by
    the tasks (`rows.gather_pieces`).
    A directory the destination cannot hold (`limits`) is a ConfigError."""
    _check_columns(table, columns)
    if table.num_rows == 0:
        return []
    order, starts, ends, directories = _partition_order(table, columns, threads, limits, keep_empty)
    data = table if keep else table.drop_columns(list(columns))
    return [
        (d, Rows(data, order, int(s), int(e)))
        for d, s, e in zip(directories, starts, ends, strict=True)
    ]


def split_by_partition(
    table: pa.Table,
    columns: Sequence[str],
    limits: NameLimits | None = None,
    keep: bool = False,
    keep_empty: bool = False,
) -> Iterator[tuple[str, pa.Table]]:
    """Yield (partition directory, rows without the partition columns unless `keep`) for
    each partition (a directory the destination cannot hold, by `limits`, is a ConfigError)."""
    if not columns:
        yield "", table
        return
    _check_columns(table, columns)
    if table.num_rows == 0:
        return
    order, starts, ends, directories = _partition_order(table, columns, 1, limits, keep_empty)
    # one gather into partition order, then zero-copy slices (not one gather per partition)
    data = (table if keep else table.drop_columns(list(columns))).take(
        pa.array(order.take(0, len(order)))
    )
    for directory, s, e in zip(directories, starts, ends, strict=True):
        yield directory, data.slice(int(s), int(e - s))


def _check_columns(table: pa.Table, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ConfigError(
            f"partition column {missing[0]!r} is not in the data; columns: "
            f"{', '.join(table.column_names)}"
        )


def _encode(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """The column dictionary-encoded in the order values first appear, nulls a value too."""
    if pa.types.is_dictionary(column.type):
        # already encoded (pandas and polars categoricals), but its nulls have no code and its
        # chunks may have different dictionaries: encode the values again
        column = column.cast(column.type.value_type)
    enc = pc.dictionary_encode(column, null_encoding="encode")
    if not isinstance(enc, pa.ChunkedArray):
        return enc
    if enc.num_chunks == 1:
        return enc.chunk(0)
    # the chunks were encoded with one memo: each chunk's dictionary is the whole one (no
    # unifying, which pyarrow cannot do for dictionaries holding a null beside a NaN)
    whole = enc.chunk(enc.num_chunks - 1).dictionary
    if all(len(c.dictionary) == len(whole) for c in enc.chunks):
        indices = pa.concat_arrays([c.indices for c in enc.chunks])
        return pa.DictionaryArray.from_arrays(indices, whole)
    return enc.combine_chunks()


def _indices(enc: pa.DictionaryArray) -> np.ndarray:
    # no nulls among the indices (a null is a value of the dictionary): no copy
    return enc.indices.to_numpy(zero_copy_only=False)


def _group_keys(codes: Sequence[tuple[np.ndarray, int]], rows: int) -> tuple[np.ndarray, int, bool]:
    """(a key per row, keys in all, whether the keys were renumbered): the rows' codes
    combined, ordered as the codes' tuples."""
    if codes and math.prod(size for _, size in codes) <= min(_RADIX_LIMIT, 1 << 16):
        # few combinations (the usual case): 16-bit keys, made in place, as the sort wants them
        key = codes[0][0].astype(np.uint16)
        for idx, size in codes[1:]:
            np.multiply(key, size, out=key)
            np.add(key, idx.astype(np.uint16), out=key)
        return key, math.prod(size for _, size in codes), False
    key = np.zeros(rows, dtype=np.int64)
    combinations = 1
    renumbered = False
    for idx, size in codes:
        key = key * size + idx
        combinations *= size
        if combinations > _COMPACT_LIMIT:
            # renumber the combinations that occur, so many columns cannot overflow the key
            _, key = np.unique(key, return_inverse=True)
            key = key.reshape(-1)
            combinations = int(key.max()) + 1
            renumbered = True
    return key, combinations, renumbered


@dataclass(frozen=True)
class _Groups:
    """Rows (a slice starting at row `offset` of the whole table, or all of it) numbered by
    partition: each row's key, the keys that occur (ascending) and their rows, each
    partition's code per column and each column's dictionary."""

    offset: int
    key: np.ndarray
    ids: np.ndarray
    counts: np.ndarray
    group_codes: list[np.ndarray]
    dictionaries: list[pa.Array]


def _groups(encoded: list[pa.DictionaryArray], rows: int, offset: int = 0) -> _Groups:
    codes = [(_indices(e), len(e.dictionary)) for e in encoded]
    key, combinations, renumbered = _group_keys(codes, rows)
    if combinations <= max(_RADIX_LIMIT, rows):
        # the groups' sizes counted, not found by sorting the keys
        counts = np.bincount(key, minlength=combinations)
        ids = np.flatnonzero(counts)
        counts = counts[ids]
    else:
        ids, counts = np.unique(key, return_counts=True)
    if renumbered:
        _, first = np.unique(key, return_index=True)  # a row of each group: its codes
        group_codes = [idx[first] for idx, _ in codes]
    else:  # the codes of each key, from the key itself
        group_codes, rest = [], ids.astype(np.int64)
        for _, size in reversed(codes):
            group_codes.insert(0, rest % size)
            rest = rest // size
    return _Groups(offset, key, ids, counts, group_codes, [e.dictionary for e in encoded])


def _split(table: pa.Table, columns: Sequence[str]) -> _Groups:
    """The table's rows numbered by partition, on one thread (the columns hashed side by
    side when the table is large). The partitions are ordered as the tuples of their values'
    codes (each column numbered in the order its values first appear)."""
    cols = [table.column(c) for c in columns]
    if len(cols) > 1 and table.num_rows >= _PARALLEL_ROWS:
        # pyarrow releases the GIL while it hashes: the columns are encoded side by side
        with ThreadPoolExecutor(len(cols)) as pool:
            encoded = list(pool.map(_encode, cols))
    else:
        encoded = [_encode(c) for c in cols]
    return _groups(encoded, table.num_rows)


def _split_slice(table: pa.Table, columns: Sequence[str], offset: int) -> _Groups:
    """Rows `table` (a slice starting at row `offset` of the whole) numbered by partition."""
    return _groups([_encode(table.column(c)) for c in columns], table.num_rows, offset)


def _sorted(key: np.ndarray) -> np.ndarray:
    """Row numbers ordered by `key`, each key's rows in input order: Arrow's counting sort
    (few partitions, the usual case) is a quarter of numpy's radix sort, and releases the GIL."""
    return pc.sort_indices(pa.array(key)).to_numpy().view(np.int64)


def _partition_order(
    table: pa.Table,
    columns: Sequence[str],
    threads: int = 1,
    limits: NameLimits | None = None,
    keep_empty: bool = False,
) -> tuple[Order, np.ndarray, np.ndarray, list[str]]:
    """(row order grouping the partitions, start and end of each partition in that order,
    each partition's directory); each partition's rows keep their input order.

    With `threads` > 1, a large table is cut into SLICES_PER_THREAD row slices per thread,
    each numbered by partition and sorted by one of the threads (`_parallel_order`); else
    numbered and sorted whole. The same order either way."""
    slices = min(threads * SLICES_PER_THREAD, table.num_rows // _PARALLEL_ROWS)
    if threads > 1 and slices > 1:
        order, counts, group_codes, dictionaries = _parallel_order(
            table, columns, slices, min(threads, slices)
        )
    else:
        split = _split(table, columns)
        order = Order.whole(_sorted(split.key))
        counts, group_codes, dictionaries = split.counts, split.group_codes, split.dictionaries
    ends = np.cumsum(counts)
    values = [
        d.take(pa.array(c)).to_pylist() for d, c in zip(dictionaries, group_codes, strict=True)
    ]
    directories = [
        partition_dir(columns, row, limits, keep_empty) for row in zip(*values, strict=True)
    ]
    return order, ends - counts, ends, directories


def _sorted_slice(
    table: pa.Table, columns: Sequence[str], offset: int
) -> tuple[_Groups, np.ndarray]:
    """A slice's rows numbered by partition (`_split_slice`) and sorted by those numbers."""
    groups = _split_slice(table, columns, offset)
    return groups, _sorted(groups.key)


def _parallel_order(
    table: pa.Table, columns: Sequence[str], slices: int, threads: int | None = None
) -> tuple[Order, np.ndarray, list[np.ndarray], list[pa.Array]]:
    """(order, each partition's rows, each partition's code per column, each column's
    dictionary) with the rows cut into `slices` contiguous slices, each numbered by
    partition and sorted on one of `threads` threads (default: one a slice; pyarrow hashes
    and sorts without the GIL), then
    merged: the slices' dictionaries joined in slice order (so each value keeps the code of
    its first appearance in the whole table), the partitions ordered by those codes, and the
    slices' sorted rows kept as runs of an `Order` (a partition's segments in slice order)."""
    n = table.num_rows
    bounds = [n * i // slices for i in range(slices + 1)]
    with ThreadPoolExecutor(threads or slices, "dataferry-split") as pool:
        done = list(
            pool.map(
                lambda i: _sorted_slice(
                    table.slice(bounds[i], bounds[i + 1] - bounds[i]), columns, bounds[i]
                ),
                range(slices),
            )
        )
    parts = [g for g, _ in done]
    # each column's codes in the whole table's numbering: the slices' dictionaries joined
    # in slice order and encoded again, so a value's code is that of its first appearance
    global_codes: list[tuple[np.ndarray, int]] = []
    dictionaries = []
    for c in range(len(columns)):
        joined = _encode(pa.concat_arrays([p.dictionaries[c] for p in parts]))
        renumber = _indices(joined).astype(np.int64)
        offsets = np.cumsum([0] + [len(p.dictionaries[c]) for p in parts])
        mapped = [renumber[offsets[i] + p.group_codes[c]] for i, p in enumerate(parts)]
        global_codes.append((np.concatenate(mapped), len(joined.dictionary)))
        dictionaries.append(joined.dictionary)
    # every slice's groups keyed as the whole table's partitions are, then ranked
    group_key, _, _ = _group_keys(global_codes, len(global_codes[0][0]))
    _, first, rank = np.unique(group_key, return_index=True, return_inverse=True)
    rank = rank.reshape(-1)
    lengths = np.concatenate([p.counts for p in parts])
    counts = np.bincount(rank, weights=lengths, minlength=len(first)).astype(np.int64)
    # a segment per slice's group (its rows, sorted, in its slice's run), ordered by
    # partition and, within one, by slice
    runs = np.repeat(np.arange(slices), [len(p.ids) for p in parts])
    run_start = np.concatenate([np.cumsum(p.counts) - p.counts for p in parts])
    by_partition = np.argsort(rank, kind="stable")
    order = Order(
        tuple(r for _, r in done),
        tuple(bounds[:-1]),
        runs[by_partition],
        run_start[by_partition],
        np.concatenate([[0], np.cumsum(lengths[by_partition])]).astype(np.int64),
    )
    return order, counts, [g[first] for g, _ in global_codes], dictionaries
