"""Committers that change the type zoo's values on purpose: the referee must report each under
`same_values`. Each is a small subclass of a real committer with one fault put in, registered
under its own name (`SPECS`; tests add the rows for their own duration, a child driver gets them
by `preload=(PRELOAD,)`), as in `broken_committers.py`.

| name                  | broken                                                      |
|-----------------------|-------------------------------------------------------------|
| broken-zone-delta     | Delta keeps a zoned column's local wall-clock time as UTC   |
| broken-drops-iceberg  | Iceberg's files leave the map column `mp` out               |
| broken-units-hudi     | Hudi keeps `ts_ns`'s microsecond counts as nanoseconds      |
| broken-ms-direct      | direct re-encodes each file with `ts_ns` in milliseconds    |
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataferry.commit.direct.committer import DirectCommitter, DirectConfig
from dataferry.commit.protocol import TaskAttemptContext
from dataferry.commit.protocol.hooks import FileColumns
from dataferry.commit.registry import KNOWN, CommitterSpec
from dataferry.commit.table.delta import DeltaCommitter, DeltaConfig
from dataferry.commit.table.hudi import HudiCommitter
from dataferry.commit.table.hudi.config import HudiConfig
from dataferry.commit.table.iceberg import IcebergCommitter, IcebergConfig

PRELOAD = f"{__name__}:register"


def _replaced(extra: FileColumns | None, schema: pa.Schema, change: Any) -> FileColumns:
    """The committer's own conversion of a file's rows, then `change(converted, original)`."""
    if extra is None:
        return FileColumns(schema=schema, prepend=lambda rows, first: change(rows, rows))
    return FileColumns(
        schema=extra.schema, prepend=lambda rows, first: change(extra.prepend(rows, first), rows)
    )


def _set(rows: pa.Table, name: str, column: Any) -> pa.Table:
    i = rows.schema.get_field_index(name)
    return rows.set_column(i, rows.schema.field(i).with_type(column.type), column)


class ZoneAsUTC(DeltaCommitter):
    """`ts_tz` (Europe/Paris) kept as its wall-clock time in Paris read as UTC: every instant
    moved by the zone's offset, the type still timestamp[us, UTC]."""

    name = "broken-zone-delta"

    def file_columns(self, task: TaskAttemptContext, relpath: str, schema: pa.Schema) -> Any:
        def change(rows: pa.Table, original: pa.Table) -> pa.Table:
            wall = pc.local_timestamp(original.column("ts_tz")).cast(pa.timestamp("us"))
            return _set(rows, "ts_tz", pc.assume_timezone(wall, "UTC"))

        return _replaced(super().file_columns(task, relpath, schema), schema, change)


class DropsMap(IcebergCommitter):
    """Every data file leaves the column `mp` out (a type it found awkward), silently: the
    table is created from the files, so no reader fails; the column is simply gone."""

    name = "broken-drops-iceberg"

    def file_columns(self, task: TaskAttemptContext, relpath: str, schema: pa.Schema) -> Any:
        extra = super().file_columns(task, relpath, schema)
        target = (schema if extra is None else extra.schema).remove(
            (schema if extra is None else extra.schema).get_field_index("mp")
        )
        inner = _replaced(extra, schema, lambda rows, original: rows.drop_columns(["mp"]))
        return FileColumns(schema=target, prepend=inner.prepend)


class MicrosAsNanos(HudiCommitter):
    """`ts_ns` converted to microseconds, then its counts read as nanoseconds again (the unit
    relabelled, the numbers kept): every value 1000 times too close to the epoch."""

    name = "broken-units-hudi"

    def file_columns(self, task: TaskAttemptContext, relpath: str, schema: pa.Schema) -> Any:
        def change(rows: pa.Table, original: pa.Table) -> pa.Table:
            counts = rows.column("ts_ns").cast(pa.int64()).cast(pa.timestamp("ns", "UTC"))
            return _set(rows, "ts_ns", counts.cast(pa.timestamp("us", "UTC"), safe=False))

        return _replaced(super().file_columns(task, relpath, schema), schema, change)


class MillisDirect(DirectCommitter):
    """Each Parquet file re-encoded on its way to the store with `ts_ns` in milliseconds: the
    file still reads, its microseconds are gone."""

    name = "broken-ms-direct"

    def write_file(self, task: TaskAttemptContext, relpath: str, data: bytes) -> str:
        if data.startswith(b"PAR1"):
            rows = pq.read_table(pa.BufferReader(data))
            ts = rows.column("ts_ns").cast(pa.timestamp("ms"), safe=False)
            buf = io.BytesIO()
            pq.write_table(_set(rows, "ts_ns", ts), buf)
            data = buf.getvalue()
        return super().write_file(task, relpath, data)


def _spec(cls: type, config: type, family: str) -> CommitterSpec:
    name: str = cls.name  # type: ignore[attr-defined]
    summary = (cls.__doc__ or "").split(":")[0]
    return CommitterSpec(
        name, __name__, cls.__name__, config.__name__, summary, {}, False, family=family
    )


SPECS: dict[str, CommitterSpec] = {
    s.name: s
    for s in (
        _spec(ZoneAsUTC, DeltaConfig, "table"),
        _spec(DropsMap, IcebergConfig, "table"),
        _spec(MicrosAsNanos, HudiConfig, "table"),
        _spec(MillisDirect, DirectConfig, "files"),
    )
}


def register() -> None:
    """Add these committers' rows to the registry of this process (a child driver's)."""
    KNOWN.update(SPECS)
