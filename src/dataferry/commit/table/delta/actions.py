"""The actions of a Delta job's transaction, built from its files' facts: add actions (path,
size, partition values as the log records them, statistics), remove actions for the files an
overwrite of partitions or a replace where takes out, the columns `schema_mode="merge"` adds,
and the check that a schema can be a Delta table's."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ....errors import ConfigError
from ..footers import FileFacts
from ..layout import partition_values
from .predicate import matches
from .types import first_line, log_partition_value


def partition_types(schema: pa.Schema, partition_by: Sequence[str]) -> dict[str, pa.DataType]:
    """Each partition column's type in the log's schema (a string if the schema lacks it)."""
    return {c: schema.field(c).type if c in schema.names else pa.string() for c in partition_by}


def log_partition_values(
    path: str, partition_by: Sequence[str], types: dict[str, pa.DataType]
) -> dict[str, str | None]:
    """A file's partition values as the log records them (`types.log_partition_value`),
    from its `col=value` directories."""
    values = partition_values(path)
    return {
        k: log_partition_value(k, values.get(k), types.get(k, pa.string())) for k in partition_by
    }


def add_action(
    facts: FileFacts,
    partition_by: Sequence[str],
    types: dict[str, pa.DataType] | None = None,
    schema: pa.Schema | None = None,
) -> Any:
    """A Delta add action for a committed file: its path relative to the table (decoded;
    delta-rs encodes it), size, partition values from its directories, and statistics (a
    `timestamp_ntz` column's bounds in deltalake's form, `2024-03-30 23:15:07.123`, without
    the zone a UTC timestamp's carry)."""
    from deltalake.transaction import AddAction

    naive = {f.name for f in schema or () if pa.types.is_timestamp(f.type) and f.type.tz is None}

    def bound(name: str, value: Any) -> Any:
        if name in naive and isinstance(value, str) and value.endswith("Z"):
            return value[:-1].replace("T", " ", 1)
        return value

    stats = {
        "numRecords": facts.rows,
        "minValues": {k: bound(k, c.min) for k, c in facts.columns.items() if c.min is not None},
        "maxValues": {k: bound(k, c.max) for k, c in facts.columns.items() if c.max is not None},
        "nullCount": {k: c.nulls for k, c in facts.columns.items() if c.nulls is not None},
    }
    return AddAction(
        facts.path,
        facts.size,
        log_partition_values(facts.path, partition_by, types or {}),
        facts.modified_ms,
        True,
        json.dumps(stats, separators=(",", ":")),
    )


def remove_actions(dt: Any, partitions: Sequence[str]) -> list[Any]:
    """Remove actions for the live files of the given partition directories (values compared
    as the log records them)."""
    from deltalake.transaction import RemoveAction

    columns = list(dt.metadata().partition_columns)
    types = partition_types(pa.schema(dt.schema().to_arrow()), columns)
    wanted = [log_partition_values(p + "/x", columns, types) for p in partitions]
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    now = int(time.time() * 1000)
    removes = []
    for a in actions:
        raw = {c: _as_text(partition_value_of(a, c)) for c in columns}
        values = {c: log_partition_value(c, v, types[c]) for c, v in raw.items()}
        if any(all(values.get(k) == v for k, v in w.items()) for w in wanted):
            removes.append(RemoveAction(a["path"], True, now, a.get("size_bytes"), values))
    return removes


def written_filters(dt: Any, partitions: Sequence[str]) -> list[tuple[str, str, Any]] | None:
    """deltalake partition filters selecting exactly the partition directories a job wrote
    (one `in` per column), or None where a conjunction cannot say it: the written partitions
    are not every combination of their columns' values, or a value is null or empty (which
    deltalake's filters do not match as the log records them)."""
    columns = list(dt.metadata().partition_columns)
    if not columns or not partitions:
        return None
    types = partition_types(pa.schema(dt.schema().to_arrow()), columns)
    written = {tuple(log_partition_values(p + "/x", columns, types).values()) for p in partitions}
    per_column = [sorted({w[i] for w in written}, key=str) for i in range(len(columns))]
    if any(v is None or v == "" for values in per_column for v in values):
        return None
    combinations = 1
    for values in per_column:
        combinations *= len(values)
    if combinations != len(written):
        return None
    return [(c, "in", values) for c, values in zip(columns, per_column, strict=True)]


def removes_matching(dt: Any, terms: Sequence[Any], types: dict[str, pa.DataType]) -> list[Any]:
    """Remove actions for the live files whose partition values satisfy a predicate's
    terms (a replace where)."""
    from deltalake.transaction import RemoveAction

    now = int(time.time() * 1000)
    removes = []
    for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist():
        values = {
            c: log_partition_value(c, _as_text(partition_value_of(a, c)), t)
            for c, t in types.items()
        }
        if matches(terms, values):
            removes.append(RemoveAction(a["path"], True, now, a.get("size_bytes"), values))
    return removes


def partition_value_of(action: dict[str, Any], column: str) -> Any:
    """A live file's partition value, from deltalake's flattened add actions. deltalake
    gives the empty string as null; a `col=` directory (how deltalake and dataferry lay out
    a '' partition) tells it apart from Hive's null directory, so an overwrite of the ''
    partition does not take the null one, nor the reverse."""
    value = action.get(f"partition.{column}")
    if value is None and partition_values(action["path"]).get(column) == "":
        return ""
    return value


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def add_new_columns(dt: Any, schema: pa.Schema) -> None:
    """Add the data's columns the table lacks (schema_mode="merge"), as nullable columns."""
    from deltalake import Schema

    have = set(pa.schema(dt.schema().to_arrow()).names)
    new = [f.with_nullable(True) for f in schema if f.name not in have]
    if new:
        fields = Schema.from_arrow(pa.schema(new)).fields
        dt.alter.add_columns(fields if len(fields) > 1 else fields[0])


def check_log_schema(schema: pa.Schema) -> None:
    """Refuse a schema deltalake cannot make a Delta schema of, naming the column (deltalake's
    own message, without the Rust backtrace it carries)."""
    from deltalake import Schema

    for f in schema:
        try:
            Schema.from_arrow(pa.schema([f]))
        except Exception as e:
            raise ConfigError(
                f"column {f.name!r} ({f.type}) cannot be a Delta table's column: {first_line(e)}"
            ) from None
