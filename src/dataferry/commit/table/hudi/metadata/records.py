"""The records of Hudi's metadata table (HoodieMetadataRecord, Hudi 0.15's HoodieMetadata.avsc)
that dataferry writes: a partition's file list and the partition list (`files`), and a file's
column statistics (`column_stats`), built from the facts each task read from its file's
footer.

Values as Hudi's own writer gives them from a Parquet footer (ParquetUtils, then
HoodieTableMetadataUtil's wrapper per Java type): int32 columns an IntWrapper, int64 and
timestamps (microseconds, UTC) a LongWrapper, dates a DateWrapper (days), decimals a
DecimalWrapper (the unscaled value at scale 15, the wrapper's decimal(30, 15)), strings a
StringWrapper. A column whose bounds dataferry cannot give exactly, or safely widened
(binary, nested, NaN, a decimal of more than 15 digits), has no record: Spark's reader then
keeps the file for a filter on it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from ...footers import ColumnFacts, FileFacts
from .keys import ALL_PARTITIONS, column_stats_key, partition_key

NAMESPACE = "org.apache.hudi.avro.model"
PARTITION_LIST, FILE_LIST, COLUMN_STATS = 1, 2, 3  # the record's `type`
_STR = {"type": "string", "avro.java.string": "String"}
_OPT_STR = ["null", _STR]
_OPT_LONG = ["null", "long"]
_DECIMAL = {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}
WRAPPERS = [  # the value union's branches, in Hudi's order
    ("BooleanWrapper", "boolean"),
    ("IntWrapper", "int"),
    ("LongWrapper", "long"),
    ("FloatWrapper", "float"),
    ("DoubleWrapper", "double"),
    ("BytesWrapper", "bytes"),
    ("StringWrapper", _STR),
    ("DateWrapper", "int"),
    ("DecimalWrapper", _DECIMAL),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    ("TimestampMicrosWrapper", "long"),
]


def _record(name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": NAMESPACE, "fields": fields}


def _opt(name: str, schema: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", schema], "default": None}


def _schema() -> dict[str, Any]:
    wrappers = [_record(n, [{"name": "value", "type": t}]) for n, t in WRAPPERS]
    stats = _record(
        "HoodieMetadataColumnStats",
        [
            {"name": "fileName", "type": _OPT_STR, "default": None},
            {"name": "columnName", "type": _OPT_STR, "default": None},
            {"name": "minValue", "type": ["null", *wrappers], "default": None},
            {"name": "maxValue", "type": ["null", *(n for n, _ in WRAPPERS)], "default": None},
            {"name": "valueCount", "type": _OPT_LONG, "default": None},
            {"name": "nullCount", "type": _OPT_LONG, "default": None},
            {"name": "totalSize", "type": _OPT_LONG, "default": None},
            {"name": "totalUncompressedSize", "type": _OPT_LONG, "default": None},
            {"name": "isDeleted", "type": "boolean"},
        ],
    )
    info = _record(
        "HoodieMetadataFileInfo",
        [{"name": "size", "type": "long"}, {"name": "isDeleted", "type": "boolean"}],
    )
    bloom = _record(
        "HoodieMetadataBloomFilter",
        [
            {"name": "type", "type": _STR},
            {"name": "timestamp", "type": _STR},
            {"name": "bloomFilter", "type": "bytes"},
            {"name": "isDeleted", "type": "boolean"},
        ],
    )
    index = _record(
        "HoodieRecordIndexInfo",
        [
            {"name": "partitionName", "type": _OPT_STR, "default": None},
            {"name": "fileIdHighBits", "type": _OPT_LONG, "default": None},
            {"name": "fileIdLowBits", "type": _OPT_LONG, "default": None},
            {"name": "fileIndex", "type": ["null", "int"], "default": None},
            {"name": "fileId", "type": _OPT_STR, "default": None},
            {"name": "instantTime", "type": _OPT_LONG, "default": None},
            {"name": "fileIdEncoding", "type": "int", "default": 0},
        ],
    )
    meta = ("commit_time", "commit_seqno", "record_key", "partition_path", "file_name")
    return _record(
        "HoodieMetadataRecord",
        [
            *(_opt(f"_hoodie_{m}", "string") for m in meta),
            {"name": "key", "type": _STR},
            {"name": "type", "type": "int"},
            {
                "name": "filesystemMetadata",
                "type": ["null", {"type": "map", "values": info, "avro.java.string": "String"}],
            },
            _opt("BloomFilterMetadata", bloom),
            _opt("ColumnStatsMetadata", stats),
            _opt("recordIndexMetadata", index),
        ],
    )


SCHEMA: dict[str, Any] = _schema()


def _base(key: str, kind: int) -> dict[str, Any]:
    return {"key": key, "type": kind, "filesystemMetadata": None}


def file_list_records(files: Mapping[str, Mapping[str, int]]) -> list[dict[str, Any]]:
    """`files`: per partition ("" : the root) the files added (name -> size), and the
    partition list naming those partitions."""
    out = []
    listed = {}
    for part in sorted(files):
        key = partition_key(part)
        listed[key] = {"size": 0, "isDeleted": False}
        record = _base(key, FILE_LIST)
        names = files[part]
        record["filesystemMetadata"] = {
            n: {"size": s, "isDeleted": False} for n, s in sorted(names.items())
        }
        out.append(record)
    everything = _base(ALL_PARTITIONS, PARTITION_LIST)
    everything["filesystemMetadata"] = listed
    return [everything, *out]


def _micros(text: str, up: bool) -> int:
    """An ISO instant (milliseconds, as the footer facts hold it) as microseconds; a maximum
    is widened to the millisecond's last microsecond (the facts dropped the rest)."""
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    micros = (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    return micros + 999 if up else micros


def _decimal(value: Any, t: pa.Decimal128Type) -> bytes:
    exact = decimal.Decimal(repr(value)).quantize(decimal.Decimal(1).scaleb(-t.scale))
    unscaled = int(exact.scaleb(15))
    return unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)


def wrap(value: Any, t: pa.DataType, up: bool) -> tuple[str, dict[str, Any]] | None:
    """A bound as the value union's branch for a column of Arrow type `t` (None: no record)."""
    if value is None:
        return None
    name: str | None = None
    if pa.types.is_boolean(t):
        name, value = "BooleanWrapper", bool(value)
    elif pa.types.is_integer(t) and t.bit_width <= 32 and t != pa.uint32():
        name = "IntWrapper"
    elif pa.types.is_integer(t):
        name = "LongWrapper"
    elif pa.types.is_float32(t):
        name = "FloatWrapper"
    elif pa.types.is_float64(t):
        name = "DoubleWrapper"
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        name = "StringWrapper"
    elif pa.types.is_date32(t):
        name, value = "DateWrapper", (dt.date.fromisoformat(value) - dt.date(1970, 1, 1)).days
    elif pa.types.is_timestamp(t) and t.unit == "us" and t.tz is not None:
        name, value = "LongWrapper", _micros(value, up)
    elif pa.types.is_decimal128(t) and t.precision <= 15:
        name, value = "DecimalWrapper", _decimal(value, t)
    if name is None:
        return None
    return f"{NAMESPACE}.{name}", {"value": value}


def column_stats_records(
    partition: str, facts: FileFacts, schema: pa.Schema
) -> Iterator[dict[str, Any]]:
    """`column_stats`: a record per column of the file whose bounds have a wrapper."""
    name = facts.path.rpartition("/")[2]
    for column, col in sorted(facts.columns.items()):
        if column not in schema.names:
            continue
        stats = _stats(name, column, col, schema.field(column).type, facts.rows)
        if stats is not None:
            record = _base(column_stats_key(column, partition, name), COLUMN_STATS)
            record["ColumnStatsMetadata"] = stats
            yield record


def _stats(
    name: str, column: str, col: ColumnFacts, t: pa.DataType, rows: int
) -> dict[str, Any] | None:
    lo, hi = wrap(col.min, t, False), wrap(col.max, t, True)
    if lo is None or hi is None or col.nulls is None:
        return None
    return {
        "fileName": name,
        "columnName": column,
        "minValue": lo,
        "maxValue": hi,
        "valueCount": rows,
        "nullCount": col.nulls,
        "totalSize": 0,
        "totalUncompressedSize": 0,
        "isDeleted": False,
    }


def all_column_stats(
    files: Iterable[tuple[str, FileFacts]], schema: pa.Schema
) -> list[dict[str, Any]]:
    """Every column-stats record of the files (partition, facts)."""
    return [r for part, f in files for r in column_stats_records(part, f, schema)]
