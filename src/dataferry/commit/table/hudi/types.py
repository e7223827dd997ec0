"""The Hudi committer's type policy: every Arrow value as Hudi's own writers (Spark's, through
Avro) keep it, decided on the driver, applied to each task's rows before they are written:

    timestamp[s|ms|us|ns, any zone] -> timestamp[us, UTC] (Avro's timestamp-micros): the same
                                      instants, nanoseconds truncated, as Spark's writer does
    timestamp[s|ms|us|ns], naive   -> timestamp[us, UTC], the wall-clock time read as UTC:
                                      what Spark (session zone UTC) makes of a naive pandas
                                      column, Hudi 0.x having no timestamp without a zone
                                      (hudi-rs cannot read Avro's local-timestamp at all)
    int8, int16, uint8, uint16     -> int32 (Avro's int: Spark's byte and short are stored so)
    uint32, uint64                 -> int64 (Avro's long; a uint64 past 2**63-1 fails its task,
                                      naming the column)
    float16                        -> float32
    date64                         -> date32
    dictionary<k, v>               -> v (a categorical is a string column)
    large_string, string_view      -> string; large_binary, binary_view, fixed_size_binary ->
                                      binary; large_list, fixed_size_list -> list
    struct, list, map<string, v>   -> the same, each child by these rules
    time, duration, interval, union, decimal256, a map whose keys are not strings, ...
                                   -> refused on the driver, naming the column (Avro, and so a
                                      Hudi table's schema, has no such type)

`file_schema` is what a base file holds (and the schema the table records); `to_file` casts a
task's rows to it. The files and the recorded Avro schema agree, so hudi-rs reads every value.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from ....errors import ConfigError
from ..casting import cast_to_file_types


def _is(kind: str) -> Callable[[pa.DataType], bool]:
    """`pa.types.is_<kind>`, or never where this pyarrow predates the type."""
    return getattr(pa.types, f"is_{kind}", lambda t: False)


_INT32 = (pa.int8(), pa.int16(), pa.uint8(), pa.uint16())
_INT64 = (pa.uint32(), pa.uint64())

_REFUSED: list[tuple[Callable[[pa.DataType], bool], str]] = [
    (pa.types.is_time, "Hudi has no time-of-day type: cast it to a string or to int64"),
    (pa.types.is_duration, "Hudi has no duration type: cast it to int64"),
    (pa.types.is_interval, "Hudi has no interval type: cast it to a string"),
    (pa.types.is_decimal256, "Hudi's decimals hold at most 38 digits: cast it to decimal128"),
    (pa.types.is_union, "Hudi has no union type: split it into columns"),
    (pa.types.is_null, "a column of nulls only has no Hudi type: cast it to the type it holds"),
    (_is("run_end_encoded"), "Hudi has no run-end encoding: decode the column"),
]


def file_type(t: pa.DataType, column: str) -> pa.DataType:
    """The Arrow type a base file holds for data of type `t` in `column`; ConfigError naming
    the column for a type Hudi has none for."""
    for test, advice in _REFUSED:
        if test(t):
            raise ConfigError(f"column {column!r} of type {t} cannot be written to Hudi: {advice}")
    if pa.types.is_dictionary(t):
        return file_type(t.value_type, column)
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", "UTC")
    if t in _INT32:
        return pa.int32()
    if t in _INT64:
        return pa.int64()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_large_string(t) or _is("string_view")(t):
        return pa.string()
    if pa.types.is_large_binary(t) or _is("binary_view")(t):
        return pa.binary()
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(file_type(t.value_type, column)))
    if _is("list_view")(t) or _is("large_list_view")(t):
        return pa.list_(t.value_field.with_type(file_type(t.value_type, column)))
    if pa.types.is_struct(t):
        return pa.struct(
            [t.field(i).with_type(file_type(t.field(i).type, column)) for i in range(t.num_fields)]
        )
    if pa.types.is_map(t):
        key = file_type(t.key_type, column)
        if key != pa.string():
            raise ConfigError(
                f"column {column!r} of type {t} cannot be written to Hudi: Avro's maps have "
                "string keys; cast the keys to strings"
            )
        return pa.map_(
            t.key_field.with_type(key), t.item_field.with_type(file_type(t.item_type, column))
        )
    return t


def file_schema(schema: pa.Schema) -> pa.Schema:
    """The schema base files hold for data of schema `schema` (column by column)."""
    return pa.schema([f.with_type(file_type(f.type, f.name)) for f in schema], schema.metadata)


def to_file(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` with the types of `schema` (same columns): timestamps truncated to microseconds
    as Spark does, every other cast checked (a uint64 past the long range is refused, naming
    the column)."""
    return cast_to_file_types(rows, schema, "Hudi's")
