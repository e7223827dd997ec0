"""What a table's log records of a data file, read from its Parquet footer where it lies: size,
rows, and per column the minimum, maximum and null count (Delta's `stats`, Hudi's write stats).

Read by the attempt that wrote the file, at its task commit (the footer is a few KiB at the
end of the file, two ranged reads), so the job commit reads no data file at all.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import struct
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import CommitError
from ...store import Store

_MAGIC = b"PAR1"


@dataclass(frozen=True)
class ColumnFacts:
    """A column's bounds over the whole file (JSON values: ISO dates and times, numbers,
    strings); None where the footer has no statistics for it."""

    min: Any = None
    max: Any = None
    nulls: int | None = None


@dataclass(frozen=True)
class FileFacts:
    path: str
    size: int
    rows: int
    modified_ms: int
    columns: dict[str, ColumnFacts] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileFacts:
        columns = {k: ColumnFacts(**v) for k, v in data.get("columns", {}).items()}
        return cls(data["path"], data["size"], data["rows"], data["modified_ms"], columns)


def read_footer(store: Store, path: str) -> tuple[int, pq.FileMetaData]:
    """The file's size and its Parquet footer, in two ranged reads."""
    size = store.stat(path).size
    if size < 12:
        raise CommitError(f"{store.full_url(path)} is not a Parquet file ({size} bytes)")
    tail = store.read_range(path, size - 8, 8)
    if tail[4:] != _MAGIC:
        raise CommitError(f"{store.full_url(path)} is not a Parquet file (no footer)")
    length = struct.unpack("<I", tail[:4])[0]
    if length + 12 > size:
        raise CommitError(f"{store.full_url(path)} has a damaged Parquet footer")
    footer = store.read_range(path, size - 8 - length, length + 8)
    return size, pq.read_metadata(pa.BufferReader(_MAGIC + footer))


def file_facts(store: Store, path: str) -> FileFacts:
    """The facts of one data file, from its footer."""
    return facts_of(path, *read_footer(store, path))


def facts_of(path: str, size: int, meta: pq.FileMetaData) -> FileFacts:
    """The facts of the data file at `path` of `size` bytes and footer `meta`."""
    return FileFacts(
        path=path,
        size=size,
        rows=meta.num_rows,
        modified_ms=int(time.time() * 1000),
        columns=column_facts(meta),
    )


def column_facts(meta: pq.FileMetaData) -> dict[str, ColumnFacts]:
    """Each top-level column's bounds and nulls over every row group (nested columns and
    columns any row group has no statistics for are left out, as a reader may then only
    not skip the file)."""
    found: dict[str, ColumnFacts] = {}
    skipped: set[str] = set()
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            name = chunk.path_in_schema
            if "." in name or name in skipped:
                continue
            st = chunk.statistics
            if st is None or not st.has_min_max or not st.has_null_count:
                skipped.add(name)
                found.pop(name, None)
                continue
            lo, hi = json_value(st.min), json_value(st.max)
            if lo is None or hi is None:
                skipped.add(name)
                found.pop(name, None)
                continue
            prev = found.get(name)
            if prev is None:
                found[name] = ColumnFacts(lo, hi, st.null_count)
            else:
                found[name] = ColumnFacts(
                    min(prev.min, lo), max(prev.max, hi), (prev.nulls or 0) + st.null_count
                )
    return found


def json_value(value: Any) -> Any:
    """A statistic as JSON holds it (Delta's stats encoding); None for what it cannot hold
    faithfully (binary, NaN)."""
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if value != value else value
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return None


def schema_to_text(schema: pa.Schema) -> str:
    """An Arrow schema as text for an intent record (its IPC form, base64)."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.BufferReader(base64.b64decode(text)))
