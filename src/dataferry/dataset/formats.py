"""File formats a task can write: Parquet, CSV and newline-delimited JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import BinaryIO

import pyarrow as pa

from ..errors import ConfigError


def _parquet(table: pa.Table, sink: BinaryIO) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, sink)


def _csv(table: pa.Table, sink: BinaryIO) -> None:
    import pyarrow.csv as pacsv

    pacsv.write_csv(table, sink)


def _json(table: pa.Table, sink: BinaryIO) -> None:
    for row in table.to_pylist():
        sink.write(json.dumps(row, default=str).encode() + b"\n")


WRITERS: dict[str, tuple[str, Callable[[pa.Table, BinaryIO], None]]] = {
    "parquet": ("parquet", _parquet),
    "csv": ("csv", _csv),
    "json": ("json", _json),
}


def writer_for(fmt: str) -> tuple[str, Callable[[pa.Table, BinaryIO], None]]:
    """(file extension, encoder) of a format; ConfigError naming an unknown one."""
    try:
        return WRITERS[fmt]
    except KeyError:
        raise ConfigError(
            f"unknown format {fmt!r}; use one of {', '.join(sorted(WRITERS))}"
        ) from None
