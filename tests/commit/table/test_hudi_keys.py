"""Record keys spelled as Hudi's Java key generators spell them.

The expected strings follow the Java rules Hudi 0.15's upsert path applies
(`KeyGenUtils.getRecordKey` -> `HoodieAvroUtils.getNestedFieldValAsString` ->
`convertValueForAvroLogicalTypes`, consistent logical timestamps off, then `toString`):
`Double.toString`/`Float.toString` (shortest digits; plain in [10^-3, 10^7), else `d.dE<n>`;
`NaN`, `Infinity`, `-0.0`), `BigDecimal.toString` (scientific when the adjusted exponent is
below -6: `0E-21`, `1.000000000000E-9`), `LocalDate.toString`, Avro timestamp-micros as the
long, `Boolean.toString`; complex keys `f:v,...` with `__null__` and `__empty__`. Spark 3.5 +
Hudi 0.15 wrote exactly these for the same values (tests/interop/test_spark_hudi_java.py).

Broken, a row dataferry upserts gets another key than the same row Spark wrote: Hudi keeps
both, and every reader sees the row twice.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.table.hudi.keys import java_float, key_strings, record_keys
from dataferry.errors import ConfigError
from dataferry.verify.type_zoo import type_zoo

UTC = dt.UTC
DOUBLES = [
    (1.0, "1.0"),
    (1e10, "1.0E10"),
    (1e7, "1.0E7"),
    (9999999.0, "9999999.0"),
    (0.001, "0.001"),
    (1e-4, "1.0E-4"),
    (123.456, "123.456"),
    (-0.5, "-0.5"),
    (0.1 + 0.2, "0.30000000000000004"),
    (1.2345e-5, "1.2345E-5"),
    (-1.5e300, "-1.5E300"),
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (math.nan, "NaN"),
    (math.inf, "Infinity"),
    (-math.inf, "-Infinity"),
]
FLOATS = [(0.1, "0.1"), (1e10, "1.0E10"), (3.5, "3.5"), (16777216.0, "1.6777216E7")]


@pytest.mark.parametrize(("value", "java"), DOUBLES)
def test_doubles_are_spelled_as_double_to_string(value, java):
    assert java_float(value) == java


@pytest.mark.parametrize(("value", "java"), FLOATS)
def test_floats_are_spelled_as_float_to_string(value, java):
    """A float32 0.1 is `0.1` in Java (Float.toString), not the double's 0.10000000149011612."""
    assert java_float(value, single=True) == java
    assert key_strings(pa.array([value], pa.float32()), "f", "x").to_pylist() == [java]


@pytest.mark.parametrize(
    ("array", "java"),
    [
        (pa.array([True, False]), ["true", "false"]),
        (pa.array([-5, 7], pa.int8()), ["-5", "7"]),
        (pa.array([2**63 - 1], pa.int64()), ["9223372036854775807"]),
        (pa.array([dt.date(2024, 3, 30)], pa.date32()), ["2024-03-30"]),
        # Avro timestamp-micros: the long, whatever the unit or zone it came in
        (pa.array([1711840507123456], pa.timestamp("us", "UTC")), ["1711840507123456"]),
        (pa.array([1711840507123456000], pa.timestamp("ns")), ["1711840507123456"]),
        (
            pa.array([1711840507123456000], pa.timestamp("ns", "UTC")).cast(
                pa.timestamp("ns", "Europe/Paris")
            ),
            ["1711840507123456"],
        ),
        (pa.array([1711840507123], pa.timestamp("ms")), ["1711840507123000"]),
        (pa.array([-1001], pa.timestamp("ns")), ["-1"]),  # truncated, as the file keeps it
        (
            pa.array([decimal.Decimal("1.01"), decimal.Decimal("0")], pa.decimal128(10, 2)),
            ["1.01", "0.00"],
        ),
        (
            pa.array([decimal.Decimal("0"), decimal.Decimal("1E-9")], pa.decimal128(31, 21)),
            ["0E-21", "1.000000000000E-9"],
        ),
        (pa.array(["a", "b"]).dictionary_encode(), ["a", "b"]),
        (pa.array(["x"], pa.large_string()), ["x"]),
    ],
)
def test_values_are_spelled_as_java_does(array, java):
    assert key_strings(array, "k", "x").to_pylist() == java


def test_complex_keys_name_each_field_and_mark_nulls_and_empties():
    rows = pa.table(
        {
            "f": pa.array([1.0, None, 1e10]),
            "s": pa.array(["", "x", None]),
            "d": pa.array([dt.date(2024, 1, 2)] * 3),
        }
    )
    assert record_keys(rows, ["f", "s", "d"], True, "x").to_pylist() == [
        "f:1.0,s:__empty__,d:2024-01-02",
        "f:__null__,s:x,d:2024-01-02",
        "f:1.0E10,s:__null__,d:2024-01-02",
    ]


def test_a_simple_key_may_be_neither_null_nor_empty():
    with pytest.raises(ConfigError, match="null or empty"):
        record_keys(pa.table({"k": pa.array([1.5, None])}), ["k"], False, "f.parquet")


@pytest.mark.parametrize("column", ["bin", "lst", "st", "mp"])
def test_a_key_field_without_a_java_spelling_is_refused_on_the_driver(tmp_path, column):
    """Avro bytes print as a ByteBuffer and nested values as Avro JSON: keys that would never
    meet Spark's. Broken, the write lands rows whose keys no Hudi writer can upsert."""
    with pytest.raises(ConfigError, match=f"record key field '{column}'"):
        dataferry.write_dataset(
            type_zoo(4),
            str(tmp_path / "t"),
            committer="hudi",
            committer_options={"table_name": "t", "record_key": column},
        )
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*.parquet"))


def test_a_float_keyed_upsert_replaces_its_row(tmp_path):
    """Keys of float, timestamp, date and decimal fields written twice: the second write
    replaces the first's rows (one row per key), as with Spark's keys."""
    dest = str(tmp_path / "t")
    keys = ["f64", "ts_utc", "d", "dec"]

    def write(data: pa.Table) -> None:
        dataferry.write_dataset(
            data, dest, committer="hudi", mode="append",
            committer_options={"table_name": "t", "record_key": keys},
        )  # fmt: skip

    zoo = type_zoo(4).select(["id", *keys])
    write(zoo)
    write(zoo.set_column(0, "id", pa.array([10, 11, 12, 13], pa.int64())))
    from dataferry.commit.lookup import committer_by_name
    from dataferry.store import open_store

    got = committer_by_name("hudi", open_store(dest)).read_rows()
    assert sorted(got.column("id").to_pylist()) == [10, 11, 12, 13]
