"""The type zoo in the reference job's files, and the value check of what a reader reads back.

Each reference file of a table committer (and of `direct`) is a small Parquet file: the
identity columns (`job`, `task`, `file`, `attempt`, `line`: which attempt of which job wrote
the row) beside every column of the type zoo (`type_zoo.ZOO_COLUMNS`; its `part` column is the
reference job's partition column). File `f` of task `t` holds `1 + f` zoo rows with ids from
`t * 16 + f * 4` (`zoo_rows`), so its third file has the zoo's empty string, NaN and nulls.

A reader's rows are compared with those rows value for value (`differences`), after what every
format's type policy (`commit/table/*_types.py`) keeps: a value's kind and value, not its Arrow
type. An unsigned integer read back as a wider signed one, a dictionary as its values, a large
string as a string are the same value; a timestamp is its integer count of nanoseconds (the
instant in UTC for a zoned column, the wall-clock time for a naive one, which Hudi's policy keeps
as the same wall-clock time read as UTC), so a zone applied twice, a wrong unit or truncated
microseconds differ. A column left out, a null, a NaN or an empty string lost, a value cast to
another kind (an integer to a float, a decimal to a float, a date to a timestamp) differ too.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import io
import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .type_zoo import PARTITION, ZOO_COLUMNS, type_zoo

IDENTITY = ("job", "task", "file", "attempt", "line")
VALUES_DIFFER = "values differ: "  # how a table view's file says its rows' values differ
VALUE_COLUMNS = tuple(c for c in ZOO_COLUMNS if c != PARTITION)  # compared value for value
_UNITS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@functools.lru_cache(maxsize=64)
def zoo_rows(task: int, file: int) -> pa.Table:
    """The zoo rows of reference file `file` of task `task` (its partition column left out)."""
    return type_zoo(1 + file, start=task * 16 + file * 4).drop_columns([PARTITION])


def reference_rows(
    task: int, file: int, attempt: int, job_uuid: str, partition: str | None
) -> pa.Table:
    """The rows of one reference file: identity columns, then the zoo's (`partition`: the
    value of the `part` column for a committer whose files hold it; None: left out)."""
    zoo = zoo_rows(task, file)
    n = zoo.num_rows
    columns: dict[str, pa.Array] = {
        "job": pa.array([job_uuid] * n, pa.string()),
        "task": pa.array([task] * n, pa.int32()),
        "file": pa.array([file] * n, pa.int32()),
        "attempt": pa.array([attempt] * n, pa.int32()),
        "line": pa.array(list(range(n)), pa.int32()),
    }
    for name in ZOO_COLUMNS:
        if name == PARTITION:
            if partition is not None:
                columns[name] = pa.array([partition] * n, pa.string())
        else:
            columns[name] = zoo.column(name)
    return pa.table(columns)


@functools.lru_cache(maxsize=512)
def zoo_file_bytes(task: int, file: int, attempt: int, job_uuid: str) -> bytes:
    """A reference file of a files committer that writes the zoo (`direct`): Parquet of
    `reference_rows`, without the partition column (its `part=` directory holds it, as in a
    Hive-style data set pandas writes)."""
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(reference_rows(task, file, attempt, job_uuid, None), buf)
    return buf.getvalue()


@dataclass(frozen=True)
class ZooFile:
    """What a zoo file's rows say: which attempt of which job wrote them, and how their
    values differ from what it wrote ('' where they do not)."""

    task: int
    file: int
    attempt: int
    job_uuid: str
    wrong: str = ""


@functools.lru_cache(maxsize=4096)
def parse_zoo_file(data: bytes) -> ZooFile | None:
    """The attempt a zoo file's bytes (`zoo_file_bytes`) come from, if they are one whole
    file of one attempt (its lines once each, in order), with its values checked; None for
    anything else."""
    if not data.startswith(b"PAR1"):
        return None
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(pa.BufferReader(data))
        ids = rows.select(list(IDENTITY)).to_pylist()
    except Exception:
        return None
    if not ids:
        return None
    first = ids[0]
    key = (first["task"], first["file"], first["attempt"], first["job"])
    if any((r["task"], r["file"], r["attempt"], r["job"]) != key for r in ids):
        return None
    if [r["line"] for r in ids] != list(range(1 + first["file"])):
        return None
    return ZooFile(*key, wrong=differences(rows, key[0], key[1]))


def differences(rows: pa.Table, task: int, file: int) -> str:
    """'' when `rows` (one reference file's rows, in line order, as a reader returns them)
    hold the zoo's values of that file; else the first difference, naming the column."""
    want = zoo_rows(task, file)
    if rows.num_rows != want.num_rows:
        return f"{rows.num_rows} rows, not {want.num_rows}"
    for name in VALUE_COLUMNS:
        if name not in rows.column_names:
            return f"column {name!r} is missing"
        got, expected = canonical(rows.column(name)), canonical(want.column(name))
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if g != e:
                return f"column {name!r} row {i}: read {_short(g)}, written {_short(e)}"
    return ""


def canonical(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """A column's values as comparable (kind, value) pairs, whatever Arrow type holds them."""
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
        t = t.value_type
    if pa.types.is_timestamp(t):
        factor = _UNITS[t.unit]
        ints = column.cast(pa.int64()).to_pylist()
        return [None if v is None else ("timestamp", v * factor) for v in ints]
    return [_value(v) for v in column.to_pylist()]


def _value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", "nan" if math.isnan(v) else v)
    if isinstance(v, str):
        return ("str", v)
    if isinstance(v, bytes):
        return ("bytes", v)
    if isinstance(v, decimal.Decimal):
        return ("decimal", v)
    if isinstance(v, dt.datetime):  # a nested timestamp: microseconds are what Python holds
        when = v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)
        return ("timestamp", (when - _EPOCH) // dt.timedelta(microseconds=1) * 1000)
    if isinstance(v, dt.date):
        return ("date", v.isoformat())
    if isinstance(v, dict):
        return ("struct", tuple(sorted((k, _value(x)) for k, x in v.items())))
    if isinstance(v, tuple):  # a map's (key, value)
        return ("pair", tuple(_value(x) for x in v))
    if isinstance(v, list):
        return ("list", tuple(_value(x) for x in v))
    return (type(v).__name__, repr(v))


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
