"""The type zoo: a small frame holding every kind of value users hand to dataferry, as pandas 2
and 3, numpy and polars produce them by default, plus the edge cases each format has rules for.

Table committers, the referee and `dataferry bench table` write it and read it back through
every reader of the format; a format's own Python writer (deltalake, pyiceberg) written with
the same frame says what the values must come back as.

Columns (`ZOO_COLUMNS` names them, in order):
    id        int64, 0..n-1: the row's key (Hudi's record key)
    part      string partition column, one value per two rows ("a", "b", ...)
    ts_ns     timestamp[ns], naive: pandas 2's and numpy's default unit
    ts_tz     timestamp[ns, Europe/Paris]: a zoned pandas column
    ts_utc    timestamp[us, UTC]
    d         date32
    u8 u16 u32 u64   unsigned integers (values that fit the signed type of the same width)
    i8 i16 i32       narrow signed integers
    f32 f64   floats (f64 with a NaN)
    flag      bool with a null
    cat       dictionary<int8, string>: a pandas categorical
    s         string with an empty string and a null
    ls        large_string: pandas 3's and polars' strings
    dec       decimal128(10, 2)
    bin       binary
    lst       list<int64> with an empty list and a null
    st        struct<a: int64, b: string>
    mp        map<string, int64>
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa

PARTITION = "part"
ZOO_COLUMNS = (
    "id",
    "part",
    "ts_ns",
    "ts_tz",
    "ts_utc",
    "d",
    "u8",
    "u16",
    "u32",
    "u64",
    "i8",
    "i16",
    "i32",
    "f32",
    "f64",
    "flag",
    "cat",
    "s",
    "ls",
    "dec",
    "bin",
    "lst",
    "st",
    "mp",
)


def type_zoo(rows: int = 8, start: int = 0) -> pa.Table:
    """`rows` rows of the zoo, ids from `start` (so two calls can append distinct rows).

    Timestamps are whole microseconds (so a format that keeps microseconds keeps every value);
    every nullable kind has a null in the first row past the id."""
    ids = list(range(start, start + rows))
    base = dt.datetime(2024, 3, 30, 23, 15, 7, 123456)
    ts = [base + dt.timedelta(hours=i, microseconds=i) for i in ids]
    strings = ["" if k == 1 else None if k == 2 else f"s{i}" for k, i in enumerate(ids)]
    lists = [[] if k == 1 else None if k == 2 else [i, i + 1] for k, i in enumerate(ids)]
    columns: dict[str, pa.Array] = {
        "id": pa.array(ids, pa.int64()),
        PARTITION: pa.array([chr(ord("a") + (k // 2) % 4) for k in range(rows)], pa.string()),
        "ts_ns": pa.array(ts, pa.timestamp("ns")),
        "ts_tz": pa.array([t.replace(tzinfo=dt.UTC) for t in ts], pa.timestamp("ns", "UTC")).cast(
            pa.timestamp("ns", "Europe/Paris")
        ),
        "ts_utc": pa.array([t.replace(tzinfo=dt.UTC) for t in ts], pa.timestamp("us", "UTC")),
        "d": pa.array([t.date() for t in ts], pa.date32()),
        "u8": pa.array([i % 128 for i in ids], pa.uint8()),
        "u16": pa.array([i % 32768 for i in ids], pa.uint16()),
        "u32": pa.array([i * 1000 for i in ids], pa.uint32()),
        "u64": pa.array([i * 10**9 for i in ids], pa.uint64()),
        "i8": pa.array([(i % 100) - 50 for i in ids], pa.int8()),
        "i16": pa.array([i - 1000 for i in ids], pa.int16()),
        "i32": pa.array([i * -7 for i in ids], pa.int32()),
        "f32": pa.array([i / 4 for i in ids], pa.float32()),
        "f64": pa.array(
            [float("nan") if k == 1 else i / 3 for k, i in enumerate(ids)], pa.float64()
        ),
        "flag": pa.array([None if k == 2 else i % 2 == 0 for k, i in enumerate(ids)], pa.bool_()),
        "cat": pa.array([["x", "y", "z"][i % 3] for i in ids])
        .dictionary_encode()
        .cast(pa.dictionary(pa.int8(), pa.string())),
        "s": pa.array(strings, pa.string()),
        "ls": pa.array([f"long-{i}" for i in ids], pa.large_string()),
        "dec": pa.array([decimal.Decimal(i * 101) / 100 for i in ids], pa.decimal128(10, 2)),
        "bin": pa.array([bytes([i % 256, 0, 255]) for i in ids], pa.binary()),
        "lst": pa.array(lists, pa.list_(pa.int64())),
        "st": pa.array(
            [{"a": i, "b": f"b{i}"} for i in ids],
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
        "mp": pa.array([[("k", i), ("m", -i)] for i in ids], pa.map_(pa.string(), pa.int64())),
    }
    return pa.table([columns[n] for n in ZOO_COLUMNS], names=list(ZOO_COLUMNS))


def type_zoo_pandas(rows: int = 8, start: int = 0):  # -> pandas.DataFrame
    """The zoo as pandas holds it after `to_pandas()` with its default types: nanosecond
    timestamps, categoricals, numpy unsigned integers (what a user's frame looks like)."""
    return type_zoo(rows, start).to_pandas()
