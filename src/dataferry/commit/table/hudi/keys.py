"""Record key values as Hudi's Java key generators spell them, so a row dataferry writes and
the same row Spark writes get the same `_hoodie_record_key` (and an upsert from either side
finds the other's row instead of adding a duplicate).

Hudi 0.15 (Spark's datasource, `upsert`/`insert`) turns each row into an Avro record and asks
its key generator for the key: `KeyGenUtils.getRecordKey` takes the field's value through
`HoodieAvroUtils.getNestedFieldValAsString` (with `consistent.logical.timestamp` off, its
default), which converts only two Avro logical types (`convertValueForAvroLogicalTypes`) and
then calls Java's `toString`:

    boolean            `Boolean.toString`: true / false
    int / long         `Long.toString` (Spark's byte and short become Avro ints)
    float / double     `Float.toString` / `Double.toString`: 1.0, 1.0E10, 1.0E-4, NaN,
                       Infinity, -0.0 (scientific below 10^-3 and from 10^7)
    decimal            `BigDecimal.toString` (the Avro decimal converted): 1.00, 0E-10
    date               `LocalDate.toString`: 2024-03-30
    timestamp          the Avro long as is: microseconds since the epoch (Spark's timestamp and
                       timestamp_ntz are both timestamp-micros in Avro)
    string             the string

A complex key is `field:value` per field joined by `,`, a null value `__null__` and an empty
one `__empty__`; a simple key (one field) may be neither. Binary, nested and time values have
no key spelling both sides share (Avro bytes print as a `ByteBuffer`): refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ....errors import ConfigError

NULL_KEY, EMPTY_KEY = "__null__", "__empty__"  # KeyGenUtils' placeholders (complex keys)


def record_keys(rows: pa.Table, keys: Sequence[str], complex_keys: bool, file: str) -> Any:
    """`_hoodie_record_key` of the rows: the value (simple), or `f1:v1,f2:v2` (complex, a
    null as `__null__` and an empty value as `__empty__`, as Hudi's KeyGenUtils writes)."""
    if not complex_keys:
        values = key_strings(rows.column(keys[0]), keys[0], file)
        if values.null_count or pc.any(pc.equal(values, "")).as_py():
            raise ConfigError(
                f"record key field {keys[0]!r} is null or empty in a row of {file}: Hudi's "
                "record keys cannot be"
            )
        return values
    parts = []
    for key in keys:
        values = key_strings(rows.column(key), key, file)
        values = pc.if_else(pc.equal(values, ""), EMPTY_KEY, values)
        values = pc.fill_null(values, NULL_KEY)
        parts.append(pc.binary_join_element_wise(f"{key}:", values, ""))
    return pc.binary_join_element_wise(*parts, ",")


def key_strings(column: Any, field: str, file: str) -> pa.Array:
    """The column's values as Java spells them in a record key (nulls stay null)."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    kind = values.type
    if pa.types.is_dictionary(kind):
        values = values.dictionary_decode()
        kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.cast(values, pa.string())
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return pc.cast(values, pa.string())
    if pa.types.is_date(kind):
        return pc.cast(pc.cast(values, pa.date32()), pa.string())
    if pa.types.is_timestamp(kind):
        return pc.cast(epoch_micros(values), pa.string())
    if pa.types.is_floating(kind):
        single = pa.types.is_float32(kind) or pa.types.is_float16(kind)
        spelled = [None if v is None else java_float(v, single) for v in values.to_pylist()]
        return pa.array(spelled, pa.string())
    if pa.types.is_decimal(kind):
        # Python's Decimal str() and Java's BigDecimal.toString() follow the same rule (the
        # General Decimal Arithmetic "to-scientific-string"): 1.00, 0E-10, 1.2E+3 never occurs
        # (a decimal column's scale is never negative)
        return pa.array([None if v is None else str(v) for v in values.to_pylist()], pa.string())
    raise key_type_error(field, kind, file)


def check_key_type(field: str, kind: pa.DataType) -> None:
    """Refuse (ConfigError, on the driver) a record key field of a type with no shared key
    spelling (binary, nested, time of day, ...)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    simple = (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
    )
    if not simple:
        raise key_type_error(field, kind, "the data")


def key_type_error(field: str, kind: pa.DataType, where: str) -> ConfigError:
    return ConfigError(
        f"record key field {field!r} of {where} is {kind}: Hudi spells no record key for it "
        "the way Spark's writer would; use a string, integer, float, decimal, date or "
        "timestamp field"
    )


def epoch_micros(values: pa.Array) -> pa.Array:
    """A timestamp column as microseconds since the epoch (whatever its unit or zone: the
    stored instant, as Spark hands it to Avro), nanoseconds truncated as the base file keeps
    them (`types.to_file`)."""
    micros = pa.timestamp("us", values.type.tz)
    return pc.cast(pc.cast(values, micros, safe=values.type.unit != "ns"), pa.int64())


def java_float(value: float, single: bool = False) -> str:
    """`Double.toString(value)` (or `Float.toString` when `single`): the shortest digits that
    read back to the value, plain from 10^-3 up to 10^7, else `d.dddE<n>`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    typed = np.float32(value) if single else np.float64(value)
    mantissa, exp_text = np.format_float_scientific(typed, unique=True, trim="-").split("e")
    sign = "-" if mantissa.startswith("-") else ""
    digits = mantissa.lstrip("-").replace(".", "")
    exp = int(exp_text)
    if 1e-3 <= abs(float(typed)) < 1e7:
        if exp >= 0:
            whole = digits[: exp + 1].ljust(exp + 1, "0")
            return f"{sign}{whole}.{digits[exp + 1 :] or '0'}"
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"
