"""The Iceberg committer's type policy: what each Arrow type of the data becomes in the table
and in its data files, decided on the driver before any task writes, as pyiceberg 0.12 writes
the same frame with its `downcast-ns-timestamp-to-us-on-write`:

    timestamp[ns] (and s, ms)    -> timestamp[us] (nanoseconds truncated, as pyiceberg's downcast)
    timestamp with any zone      -> timestamp[us, UTC], Iceberg's timestamptz: the same instants
                                    (pyiceberg refuses zones other than UTC; deltalake converts)
    int8, int16, uint8, uint16   -> int32 (Iceberg's int)
    uint32, uint64               -> int64 (long; a uint64 past 2**63-1 fails its task; into
                                    an int column pyiceberg made from uint32: int32, checked)
    dictionary<k, v>             -> v (Iceberg has no dictionary type)
    float16                      -> float32
    time32 (s, ms)               -> time64[us] (Iceberg's time; a time64[ns] is refused)
    fixed-size lists             -> lists
    lists, structs, maps         -> their children converted

The tasks cast their rows to these types (`file_schema`, `cast_rows`), so every data file holds
the table's types and every reader reads them; into a table that exists, a column also takes
the table's wider type where Iceberg promotes (int to long, float to double, a decimal's
precision), as pyiceberg does. A type Iceberg has none for is refused naming the column.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ....errors import ConfigError
from ..casting import cast_to_file_types
from ..footers import schema_from_text

_INT32 = (pa.int8(), pa.int16(), pa.uint8(), pa.uint16())
_INT64 = (pa.uint32(), pa.uint64())


def file_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type an Iceberg data file holds for data of type `t` (`t` when it is one)."""
    if pa.types.is_dictionary(t):
        return file_type(t.value_type)
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", "UTC" if t.tz else None)
    if t in _INT32:
        return pa.int32()
    if t in _INT64:
        return pa.int64()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_time32(t):
        return pa.time64("us")
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = t.value_field.with_type(file_type(t.value_type))
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    if pa.types.is_struct(t):
        return pa.struct(
            [t.field(i).with_type(file_type(t.field(i).type)) for i in range(t.num_fields)]
        )
    if pa.types.is_map(t):
        key = t.key_field.with_type(file_type(t.key_type))
        return pa.map_(key, t.item_field.with_type(file_type(t.item_type)))
    return t


def promoted(data: pa.DataType, table: pa.DataType) -> pa.DataType | None:
    """The table's type when data of (file) type `data` goes into a column of type `table` by
    one of Iceberg's promotions (int -> long, float -> double, a decimal's precision widened,
    as pyiceberg's `promote`); None when it is no promotion."""
    if data == pa.int32() and table == pa.int64():
        return table
    if data == pa.float32() and table == pa.float64():
        return table
    decimals = pa.types.is_decimal(data) and pa.types.is_decimal(table)
    if decimals and data.scale == table.scale and data.precision <= table.precision:
        return table
    return None


def file_schema(data: pa.Schema, table: Mapping[str, pa.DataType] | None = None) -> pa.Schema:
    """The schema of the data files written from data of schema `data`: each column's file
    type, or the type of the table's column (`table`: name -> Arrow type as files hold it)
    where Iceberg promotes the data's type to it."""
    out = []
    for f in data:
        target = file_type(f.type)
        wider = promoted(target, table[f.name]) if table and f.name in table else None
        if table and f.type == pa.uint32() and table.get(f.name) == pa.int32():
            wider = pa.int32()  # pyiceberg makes uint32 an int: a checked cast into one
        out.append(f.with_type(wider or target))
    return pa.schema(out, metadata=data.metadata)


def cast_rows(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` with the types of `schema` (same columns, same order): timestamps truncated to
    microseconds as pyiceberg's downcast does, every other cast checked (a uint64 past the
    long range fails, naming the column)."""
    return cast_to_file_types(rows, schema, "the Iceberg table's")


def iceberg_schema(url: str, schema: pa.Schema) -> Any:
    """The Iceberg schema of a table created from file schema `schema` (as pyiceberg's catalog
    converts it); ConfigError naming the column Iceberg has no type for."""
    from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow
    from pyiceberg.schema import assign_fresh_schema_ids

    for f in schema:
        try:
            visit_pyarrow(pa.schema([f]), _ConvertToIcebergWithoutIDs())
        except Exception as e:
            raise ConfigError(
                f"column {f.name!r} of type {f.type} has no Iceberg type (Iceberg table {url}): "
                f"{e}; cast it to a type Iceberg has (e.g. a string, a long, a timestamp in "
                "microseconds) or leave it out"
            ) from None
    return assign_fresh_schema_ids(visit_pyarrow(schema, _ConvertToIcebergWithoutIDs()))


def arrow_types(iceberg: Any) -> dict[str, pa.DataType]:
    """A table's columns as its data files hold them (name -> Arrow type, `plain`)."""
    return {f.name: plain(f.type) for f in iceberg.as_arrow()}


def plain(t: pa.DataType) -> pa.DataType:
    """`t` without what the Parquet files of one Iceberg type may differ in: string and binary
    widths, the names and nullability of nested fields, dictionary encoding."""
    if pa.types.is_dictionary(t):
        return plain(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(plain(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([(t.field(i).name, plain(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(plain(t.key_type), plain(t.item_type))
    return t


@functools.lru_cache(maxsize=8)
def types_from_text(text: str) -> dict[str, pa.DataType]:
    """Column types written down as an Arrow schema in text (`footers.schema_to_text`)."""
    return {f.name: f.type for f in schema_from_text(text)}
