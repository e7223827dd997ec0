"""Casting a task's rows to the types a table's files hold: one rule for every format whose
policy truncates nanosecond timestamps to microseconds (as deltalake, pyiceberg's downcast and
Spark do) and checks every other cast, so a value that does not fit (a uint64 past the long
range) fails naming its column instead of wrapping."""

from __future__ import annotations

import pyarrow as pa

from ...errors import ConfigError


def cast_to_file_types(rows: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """`rows` with the types of `schema` (same columns, same order); a value that does not
    fit raises ConfigError naming the column and `what` ("Hudi's", "the Iceberg table's")."""
    columns = []
    for column, f in zip(rows.columns, schema, strict=True):
        if column.type == f.type:
            columns.append(column)
            continue
        try:
            columns.append(column.cast(f.type, safe=not has_nanoseconds(column.type)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise ConfigError(
                f"column {f.name!r}: a value of type {column.type} does not fit {what} "
                f"{f.type} ({e}); cast the column to a type that holds it"
            ) from None
    return pa.Table.from_arrays(columns, schema=schema)


def has_nanoseconds(t: pa.DataType) -> bool:
    """Whether the type holds a nanosecond timestamp anywhere (nested ones too)."""
    if pa.types.is_timestamp(t):
        return t.unit == "ns"
    if pa.types.is_dictionary(t):
        return has_nanoseconds(t.value_type)
    return any(has_nanoseconds(t.field(i).type) for i in range(t.num_fields))
