"""The Delta committer's type policy: every Arrow value as `deltalake.write_deltalake` (1.x)
keeps it, decided once, for the log's schema and for the data files alike.

    timestamp[s|ms|us|ns]          -> timestamp[us] (Delta's `timestamp_ntz`); nanoseconds are
                                      truncated to microseconds, as deltalake does
    timestamp[*, any zone]         -> timestamp[us, UTC] (Delta's `timestamp`): the same
                                      instants, in the only zone Delta has
    uint8|16|32|64                 -> int8|16|32|64 (byte, short, integer, long): a value
                                      beyond the signed type is refused, as deltalake does
    date64                         -> date32
    fixed_size_binary              -> binary
    dictionary<k, v>               -> v in the log (a categorical is a string column); the
                                      files keep the dictionary, as deltalake's do
    large_string, string_view      -> string in the log; large_binary, binary_view -> binary;
    large_list, fixed_size_list,      list: the files keep their width (Parquet stores
    list_view                         them alike), as deltalake's do
    struct, list, map              -> the same, each child by these rules
    time32/64, duration, decimal256, float16, ...
                                   -> refused on the driver, naming the column (Delta has no
                                      such type; deltalake refuses them too)

`log_schema` is the schema the table's log records; `file_schema` is what a data file is
written with (the log's types, but string and list widths and dictionaries as the data has
them); `to_files` converts a task's rows to it, naming the column of a value that cannot be
kept. Nested values (a list of unsigned integers, a struct's zoned timestamp) follow the same
rules: a file's Parquet schema always matches the log's, so every reader reads it.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from ....errors import ConfigError

_SIGNED = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}

# types Delta has no counterpart for, and what a user can cast them to first
_REFUSED: list[tuple[Callable[[pa.DataType], bool], str]] = [
    (pa.types.is_time, "Delta has no time-of-day type: cast it to a string or to int64"),
    (pa.types.is_duration, "Delta has no duration type: cast it to int64"),
    (pa.types.is_interval, "Delta has no interval type: cast it to a string"),
    (pa.types.is_float16, "Delta has no half-precision float: cast it to float32"),
    (
        pa.types.is_decimal256,
        "Delta's decimals hold at most 38 digits: cast it to decimal128(p, s) with p <= 38",
    ),
    (pa.types.is_union, "Delta has no union type: split it into columns"),
    (pa.types.is_run_end_encoded, "Delta has no run-end encoding: decode the column"),
]


def _refusal(t: pa.DataType) -> str | None:
    for test, advice in _REFUSED:
        if test(t):
            return advice
    if isinstance(t, pa.ExtensionType):
        return "Delta has no extension types: cast it to its storage type"
    return None


def _children(t: pa.DataType) -> list[pa.Field]:
    return [t.field(i) for i in range(t.num_fields)]


def file_type(t: pa.DataType) -> pa.DataType:
    """The type a data file holds `t` as: the log's, but widths and dictionaries kept."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", "UTC" if t.tz is not None else None)
    if pa.types.is_unsigned_integer(t):
        return _SIGNED[t.bit_width]
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        value = file_type(t.value_type)
        return t if value == t.value_type else value
    if pa.types.is_struct(t):
        return pa.struct([_field(f, file_type) for f in _children(t)])
    if pa.types.is_map(t):
        return pa.map_(
            _field(t.key_field, file_type), _field(t.item_field, file_type), t.keys_sorted
        )
    if pa.types.is_list(t):
        return pa.list_(_field(t.value_field, file_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_field(t.value_field, file_type))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_field(t.value_field, file_type), t.list_size)
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_field(t.value_field, file_type))
    return t


def log_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type of the table's log schema for data of type `t` (as deltalake's
    `DeltaTable.schema().to_arrow()` gives it back)."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return log_type(t.value_type)
    if pa.types.is_struct(t):
        return pa.struct([_field(f, log_type) for f in _children(t)])
    if pa.types.is_map(t):
        return pa.map_(_field(t.key_field, log_type), _field(t.item_field, log_type))
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return pa.list_(_field(t.value_field, log_type))
    converted = file_type(t)
    return converted if converted == t else log_type(converted)


def _field(f: pa.Field, convert: Callable[[pa.DataType], pa.DataType]) -> pa.Field:
    return pa.field(f.name, convert(f.type), f.nullable, f.metadata)


def check_types(schema: pa.Schema) -> None:
    """Refuse (on the driver, before any task) a column of a type Delta has no counterpart
    for, naming the column (a nested one by its path) and what to cast it to."""
    for f in schema:
        _check_type(f.name, f.type)


def _check_type(path: str, t: pa.DataType) -> None:
    advice = _refusal(t)
    if advice is not None:
        raise ConfigError(f"column {path!r} is {t}, which a Delta table cannot hold: {advice}")
    if pa.types.is_dictionary(t):
        _check_type(path, t.value_type)
    elif pa.types.is_map(t):
        _check_type(f"{path}.key", t.key_type)
        _check_type(f"{path}.value", t.item_type)
    elif pa.types.is_struct(t) or hasattr(t, "value_field"):
        for child in _children(t):
            name = child.name if pa.types.is_struct(t) else "element"
            _check_type(f"{path}.{name}", child.type)


def log_schema(schema: pa.Schema) -> pa.Schema:
    """The schema a Delta table's log records for data of `schema`."""
    return pa.schema([_field(f, log_type) for f in schema], schema.metadata)


def file_schema(schema: pa.Schema) -> pa.Schema:
    """The schema a data file holding rows of `schema` is written with."""
    return pa.schema([_field(f, file_type) for f in schema], schema.metadata)


def _truncated(t: pa.DataType) -> pa.DataType:
    """`t` with only its nanosecond timestamps (and date64) converted: the conversions that
    drop precision on purpose (deltalake truncates them alike); the rest is converted after,
    where a value that does not fit is an error."""
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", t.tz)
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_dictionary(t):
        value = _truncated(t.value_type)
        return t if value == t.value_type else value
    if pa.types.is_struct(t):
        return pa.struct([_field(f, _truncated) for f in _children(t)])
    if pa.types.is_map(t):
        return pa.map_(
            _field(t.key_field, _truncated), _field(t.item_field, _truncated), t.keys_sorted
        )
    if pa.types.is_list(t):
        return pa.list_(_field(t.value_field, _truncated))
    if pa.types.is_large_list(t):
        return pa.large_list(_field(t.value_field, _truncated))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_field(t.value_field, _truncated), t.list_size)
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(_field(t.value_field, _truncated))
    return t


def convert_column(name: str, column: pa.ChunkedArray | pa.Array, target: pa.DataType, where: str):
    """One column as a data file holds it; ConfigError naming the column (and `where`: the
    file) for a value the Delta type cannot hold (an unsigned value past the signed type's
    maximum, a timestamp past the microsecond range)."""
    if column.type == target:
        return column
    step = _truncated(column.type)
    if step != column.type:
        column = pc.cast(column, step, safe=False)
    if column.type == target:
        return column
    try:
        return pc.cast(column, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        advice = (
            "Delta has no unsigned integers, so deltalake refuses it too: cast the column "
            "to a wider signed type (uint8 -> int16, uint64 -> decimal128(20, 0)) first"
            if _has_unsigned(column.type)
            else f"cast the column to {target} yourself, deciding what such values become"
        )
        raise ConfigError(
            f"column {name!r} of {where} has a value that Delta's {target} cannot hold "
            f"({first_line(e)}); {advice}"
        ) from None


def _has_unsigned(t: pa.DataType) -> bool:
    if pa.types.is_unsigned_integer(t):
        return True
    if pa.types.is_dictionary(t):
        return _has_unsigned(t.value_type)
    return any(_has_unsigned(f.type) for f in _children(t))


def to_files(rows: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """`rows` converted to the file schema `schema` (`file_schema` of their own)."""
    if rows.schema.equals(schema):
        return rows
    columns = [convert_column(f.name, rows.column(f.name), f.type, where) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def first_line(error: BaseException) -> str:
    """A library's message without the Rust backtrace deltalake appends to some."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


_FRACTION = re.compile(r"(\.\d{6})\d+")


def log_partition_value(column: str, text: str | None, t: pa.DataType) -> str | None:
    """A partition value as a Delta log records it (the protocol's partition value
    serialization, as deltalake writes it), from the text of its `col=value` directory (the
    value's Python form): booleans `true`/`false`, timestamps in UTC with microseconds
    (`2024-03-30 23:15:07.123456`), binary as `\\u00XX` per byte. An integer past the column's
    signed type is a ConfigError naming the column, as deltalake refuses it."""
    if text is None:
        return None
    if pa.types.is_boolean(t):
        return text.lower()
    if pa.types.is_timestamp(t):
        when = dt.datetime.fromisoformat(_FRACTION.sub(r"\1", text))
        if when.tzinfo is not None:
            when = when.astimezone(dt.UTC).replace(tzinfo=None)
        return when.strftime("%Y-%m-%d %H:%M:%S.%f")
    if pa.types.is_binary(t) and text[:2] in ("b'", 'b"'):
        return "".join(f"\\u{b:04X}" for b in ast.literal_eval(text))
    if pa.types.is_integer(t):
        info = _int_range(t)
        if not info[0] <= int(text) <= info[1]:
            raise ConfigError(
                f"partition column {column!r} has the value {text}, which Delta's {t} cannot "
                "hold: Delta has no unsigned integers, so deltalake refuses it too; cast the "
                "column to a wider signed type (uint8 -> int16, ...) first"
            )
    return text


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


__all__ = [
    "check_types",
    "convert_column",
    "file_schema",
    "file_type",
    "first_line",
    "log_partition_value",
    "log_schema",
    "log_type",
    "to_files",
]
