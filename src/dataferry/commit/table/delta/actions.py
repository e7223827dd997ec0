"""The actions of a Delta job's transaction, in PROTOCOL.md's shapes, built from its files'
facts: add actions (path as a URI, size, partition values as the log records them,
statistics), remove actions for the files an overwrite, an overwrite of partitions or a
replace where takes out, the table's `metaData`, and the check that a schema can be a Delta
table's."""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet

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


# characters a Delta path keeps as they are (what delta-rs leaves unescaped in its paths)
_PATH_SAFE = "/=+:@&,;!$'()"


def log_path(path: str) -> str:
    """A file's path relative to the table as the log writes it: a URI, percent-encoded as
    delta-rs encodes it (`p=a%20b/` is logged `p=a%2520b/`)."""
    return urllib.parse.quote(path, safe=_PATH_SAFE)


def store_path(logged: str) -> str:
    """A logged path as the store names the file (`log_path` undone): what is compared with
    listings and markers, read and deleted. Left encoded, `p=a b%/` would be taken for a file
    no version references, and a rollback could delete a committed one."""
    return urllib.parse.unquote(logged)


def add_action(
    facts: FileFacts,
    partition_by: Sequence[str],
    types: dict[str, pa.DataType] | None = None,
    schema: pa.Schema | None = None,
) -> dict[str, Any]:
    """A Delta add action for a committed file: its path (`log_path`), size, partition
    values from its directories, and statistics (a `timestamp_ntz` column's bounds in
    deltalake's form, `2024-03-30 23:15:07.123`, without the zone a UTC timestamp's carry)."""
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
    return {
        "add": {
            "path": log_path(facts.path),
            "partitionValues": log_partition_values(facts.path, partition_by, types or {}),
            "size": facts.size,
            "modificationTime": facts.modified_ms,
            "dataChange": True,
            "stats": json.dumps(stats, separators=(",", ":")),
        }
    }


def job_adds(
    facts: Sequence[FileFacts], partition_by: Sequence[str], schema: pa.Schema | None
) -> list[dict[str, Any]]:
    """A job's add actions, one per file, on its schema as the log has it (`log_schema`'s):
    what its own log entry carries, and what a group's leader checks another job's commit
    request against (`request_check`)."""
    types = partition_types(schema, partition_by) if schema is not None else {}
    return [add_action(f, partition_by, types, schema) for f in facts]


def remove_action(live: Mapping[str, Any], values: Mapping[str, str | None], now_ms: int) -> dict:
    """A remove action for a live file (deltalake's flattened add action, its path as the
    log has it), as deltalake writes one."""
    body: dict[str, Any] = {
        "path": live["path"],
        "dataChange": True,
        "deletionTimestamp": now_ms,
        "extendedFileMetadata": True,
        "partitionValues": dict(values),
    }
    if live.get("size_bytes") is not None:
        body["size"] = live["size_bytes"]
    return {"remove": body}


def live_actions(dt: Any) -> list[dict[str, Any]]:
    """The table's live files, as deltalake's flattened add actions."""
    return pa.table(dt.get_add_actions(flatten=True)).to_pylist()


def remove_all(dt: Any, now_ms: int) -> list[dict[str, Any]]:
    """Remove actions for every live file (an overwrite)."""
    columns = list(dt.metadata().partition_columns)
    types = partition_types(pa.schema(dt.schema().to_arrow()), columns)
    return [remove_action(a, _log_values(a, columns, types), now_ms) for a in live_actions(dt)]


def _log_values(
    action: Mapping[str, Any], columns: Sequence[str], types: dict[str, pa.DataType]
) -> dict[str, str | None]:
    return {
        c: log_partition_value(c, _as_text(partition_value_of(action, c)), types[c])
        for c in columns
    }


def delta_schema(schema: pa.Schema) -> str:
    """A schema as the log's `schemaString` (deltalake's JSON of it, compact)."""
    from deltalake import Schema

    return json.dumps(json.loads(Schema.from_arrow(schema).to_json()), separators=(",", ":"))


def metadata_action(
    schema_string: str,
    partition_by: Sequence[str],
    *,
    kept: Any = None,
    name: str = "",
    description: str = "",
    configuration: Mapping[str, str] | None = None,
    now_ms: int,
) -> dict[str, Any]:
    """The table's `metaData` action: a new table's (a fresh id), or `kept`'s (deltalake's
    Metadata of the table: id, name, description, configuration and creation time kept
    unless given) with a new schema and partitioning."""
    return {
        "metaData": {
            "id": kept.id if kept is not None else str(uuid.uuid4()),
            "name": name or (kept.name if kept is not None else None),
            "description": description or (kept.description if kept is not None else None),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": list(partition_by),
            "createdTime": kept.created_time if kept is not None else now_ms,
            "configuration": dict(
                configuration or (kept.configuration if kept is not None else {})
            ),
        }
    }


def remove_actions(dt: Any, partitions: Sequence[str], now_ms: int) -> list[dict[str, Any]]:
    """Remove actions for the live files of the given partition directories (values compared
    as the log records them)."""
    columns = list(dt.metadata().partition_columns)
    types = partition_types(pa.schema(dt.schema().to_arrow()), columns)
    wanted = [log_partition_values(p + "/x", columns, types) for p in partitions]
    removes = []
    for a in live_actions(dt):
        values = _log_values(a, columns, types)
        if any(all(values.get(k) == v for k, v in w.items()) for w in wanted):
            removes.append(remove_action(a, values, now_ms))
    return removes


def removes_matching(
    dt: Any, terms: Sequence[Any], types: dict[str, pa.DataType], now_ms: int
) -> list[dict[str, Any]]:
    """Remove actions for the live files whose partition values satisfy a predicate's
    terms (a replace where)."""
    removes = []
    for a in live_actions(dt):
        values = _log_values(a, list(types), types)
        if matches(terms, values):
            removes.append(remove_action(a, values, now_ms))
    return removes


def written_predicate(
    partitions: Sequence[str], columns: Sequence[str], types: dict[str, pa.DataType]
) -> str:
    """An overwrite of partitions as the predicate deltalake would log for it: the
    partitions written, one conjunction each (`p = 'a' OR p = 'b'`)."""

    def term(column: str, value: str | None) -> str:
        name = column if column.isidentifier() else f"`{column}`"
        if value is None:
            return f"{name} IS NULL"
        t = types.get(column, pa.string())
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            return f"{name} = {value}"
        return f"{name} = '" + value.replace("'", "''") + "'"

    written = sorted(
        {tuple(log_partition_values(p + "/x", columns, types).items()) for p in partitions},
        key=str,
    )
    ands = [" AND ".join(term(c, v) for c, v in w) for w in written]
    if len(ands) > 1 and len(columns) > 1:
        ands = [f"({a})" for a in ands]
    return " OR ".join(ands)


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


def rows_of(store: Any, dt: Any) -> pa.Table:
    """The rows of deltalake's table `dt`, each live file read through `store` with its
    partition values, and null for a column added since the file was written."""
    schema = pa.schema(dt.schema().to_arrow())
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    parts = list(dt.metadata().partition_columns)
    pieces = []
    for a in actions:
        rows = store.read_bytes(store_path(a["path"]))
        t = pa.parquet.read_table(pa.BufferReader(rows))
        for c in parts:
            value = partition_value_of(a, c)
            t = t.append_column(c, pa.array([value] * t.num_rows, schema.field(c).type))
        for c in schema.names:  # a file from before a schema evolution lacks the new columns
            if c not in t.column_names:
                t = t.append_column(c, pa.nulls(t.num_rows, schema.field(c).type))
        pieces.append(t.select(schema.names).cast(schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()
