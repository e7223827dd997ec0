"""Whether a reader gave back the same rows and values as expected: tables compared by value,
column by column, after each side is put in one canonical Arrow form.

The canonical form keeps values and drops what is only a reader's way of holding them:
dictionary encoding (decoded), large and view strings, binaries and lists (plain ones), the
width and sign of integers (int64), float width (float64), timestamp units (microseconds: the
unit every format here keeps), a time zone's name (an aware timestamp is its instant, shown as
UTC), decimal precision (38), and a map (a list of key/value structs, as polars holds it). A
naive and an aware timestamp stay different; so do a string and a number. NaN equals NaN.
Rows are matched by a key column (sorted by it).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc


def canonical_type(t: pa.DataType) -> pa.DataType:
    """The type values of `t` are compared in (see the module's docstring)."""
    if pa.types.is_dictionary(t):
        return canonical_type(t.value_type)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", "UTC" if t.tz else None)
    if pa.types.is_date(t):
        return pa.date32()
    if pa.types.is_decimal(t):
        return pa.decimal128(38, t.scale)
    if pa.types.is_map(t):
        entry = pa.struct(
            [("key", canonical_type(t.key_type)), ("value", canonical_type(t.item_type))]
        )
        return pa.list_(entry)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(canonical_type(t.value_type))
    if pa.types.is_large_list_view(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(canonical_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([(f.name, canonical_type(f.type)) for f in t])
    return t


def canonical(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """`column` in its canonical type (unchanged if it cannot be cast: it then differs)."""
    target = canonical_type(column.type)
    if target == column.type:
        return column
    try:
        return column.cast(target, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if pa.types.is_dictionary(column.type):  # nested dictionaries: decode, then cast
            return canonical(column.cast(column.type.value_type))
        return column


def _equal(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    if a.type != b.type:
        return False
    if pa.types.is_floating(a.type):  # NaN is a value like any other here
        nan_a, nan_b = pc.is_nan(a), pc.is_nan(b)
        if not nan_a.equals(nan_b):
            return False
        return pc.if_else(nan_a, 0.0, a).equals(pc.if_else(nan_b, 0.0, b))
    return a.equals(b)


def differences(
    expected: pa.Table, actual: pa.Table, columns: Sequence[str], key: str
) -> list[str]:
    """What differs between `actual` and `expected` in `columns`, rows matched by `key`
    (empty: the same rows and values)."""
    missing = [c for c in columns if c not in actual.column_names]
    if missing:
        return [f"missing column{'s' * (len(missing) > 1)} {', '.join(missing)}"]
    if actual.num_rows != expected.num_rows:
        return [f"{actual.num_rows:,} rows of {expected.num_rows:,}"]
    exp = expected.select(list(columns)).sort_by(key)
    act = actual.select(list(columns)).sort_by(key)
    found = []
    for name in columns:
        a, b = canonical(exp.column(name)), canonical(act.column(name))
        if a.type != b.type:
            found.append(f"{name} ({b.type} for {a.type})")
        elif not _equal(a, b):
            found.append(f"{name} (values)")
    return found
