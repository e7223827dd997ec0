"""File formats a task can write: Parquet, CSV and newline-delimited JSON.

Each format gives an incremental writer: a file is opened once, takes tables as rows arrive
(Parquet: row groups) and is finished by `close`. Format options reach pyarrow's own writers
unchanged, so a Parquet file carries the compression, dictionary and statistics settings the
user asked for.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO, Protocol

import pyarrow as pa

from ..errors import ConfigError
from .options import WriteOptions


class FileWriter(Protocol):
    def write(self, table: pa.Table) -> None: ...

    def close(self) -> None: ...


class _ParquetWriter:
    def __init__(self, sink: BinaryIO, schema: pa.Schema, options: WriteOptions) -> None:
        import pyarrow.parquet as pq

        self._rows_per_group = options.max_rows_per_group
        try:
            self._writer = pq.ParquetWriter(sink, schema, **options.format_options)
        except (TypeError, ValueError, pa.ArrowException) as e:
            raise ConfigError(f"parquet writer options {options.format_options}: {e}") from e

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table, row_group_size=self._rows_per_group)

    def close(self) -> None:
        self._writer.close()


class _CsvWriter:
    def __init__(self, sink: BinaryIO, schema: pa.Schema, options: WriteOptions) -> None:
        import pyarrow.csv as pacsv

        try:
            write_options = pacsv.WriteOptions(**options.format_options)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"csv writer options {options.format_options}: {e}") from e
        self._writer = pacsv.CSVWriter(sink, schema, write_options=write_options)

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table)

    def close(self) -> None:
        self._writer.close()


class _JsonLinesWriter:
    def __init__(self, sink: BinaryIO, schema: pa.Schema, options: WriteOptions) -> None:
        self._sink = sink

    def write(self, table: pa.Table) -> None:
        lines = [json.dumps(row, default=str) for row in table.to_pylist()]
        if lines:
            self._sink.write(("\n".join(lines) + "\n").encode())

    def close(self) -> None:
        return None


WRITERS: dict[str, Any] = {
    "parquet": _ParquetWriter,
    "csv": _CsvWriter,
    "json": _JsonLinesWriter,
}


def open_writer(sink: BinaryIO, schema: pa.Schema, options: WriteOptions) -> FileWriter:
    """An incremental writer of `options.format` on `sink` (which the caller closes)."""
    try:
        cls = WRITERS[options.format]
    except KeyError:
        raise ConfigError(
            f"unknown format {options.format!r}; use one of {', '.join(sorted(WRITERS))}"
        ) from None
    return cls(sink, schema, options)


def check_writer(options: WriteOptions) -> None:
    """Open and close a writer with the options on a one-column schema: a value pyarrow
    refuses (`compression="nope"`) fails here, on the driver, naming the options."""
    sink = pa.BufferOutputStream()
    try:
        open_writer(sink, pa.schema([("x", pa.int64())]), options).close()  # type: ignore[arg-type]
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"{options.format} writer options {options.format_options}: {e}") from e


def encoded_size(table: pa.Table, options: WriteOptions) -> int:
    """Bytes `table` takes once written in the format (to learn the data's ratio)."""
    sink = pa.BufferOutputStream()
    writer = open_writer(sink, table.schema, options)  # type: ignore[arg-type]
    writer.write(table)
    writer.close()
    return sink.getvalue().size
