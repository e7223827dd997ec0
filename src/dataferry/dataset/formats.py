"""File formats a task can write: Parquet, CSV and newline-delimited JSON.

Each format gives an incremental writer: a file is opened once, takes tables as rows arrive
(Parquet: row groups) and is finished by `close`. Format options reach pyarrow's own writers
unchanged, so a Parquet file carries the compression, dictionary and statistics settings the
user asked for.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, BinaryIO, Protocol

import pyarrow as pa
import pyarrow.compute as pc

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


# Parquet dictionary encoding pays when a column repeats its values; on a column of mostly
# distinct values (ids, amounts) it hashes every value, builds a dictionary as large as the
# data and writes both: a third of the write's CPU on typical data, for a larger file. A
# column is dictionary-encoded when a sample of the rows holds at most this share of
# distinct values (the sample is taken from the first rows a task writes).
DICTIONARY_MAX_DISTINCT = 0.25
DICTIONARY_SAMPLE_ROWS = 8_192  # a few milliseconds of hashing, once per task
DICTIONARY_MIN_SAMPLE = 2_048  # fewer rows tell too little (and cost too little to matter)


def choose_dictionary(options: WriteOptions, sample: Sequence[pa.Table]) -> WriteOptions:
    """`options` with Parquet's `use_dictionary` set to the columns worth it, judged on up to
    DICTIONARY_SAMPLE_ROWS rows of `sample` (tables of the file schema). Unchanged when the
    user chose the encodings (`use_dictionary`, `column_encoding`), for other formats, for
    nested columns (their leaves have paths of their own) and for too small a sample."""
    chosen = options.format_options
    if options.format != "parquet" or "use_dictionary" in chosen or "column_encoding" in chosen:
        return options
    rows, tables = 0, []
    for table in sample:
        if rows >= DICTIONARY_SAMPLE_ROWS:
            break
        tables.append(table.slice(0, DICTIONARY_SAMPLE_ROWS - rows))
        rows += tables[-1].num_rows
    if rows < DICTIONARY_MIN_SAMPLE or not tables:
        return options
    # one chunk per column: the hash kernels pay per chunk, and a task's pieces are many
    data = (pa.concat_tables(tables) if len(tables) > 1 else tables[0]).combine_chunks()
    if any(pa.types.is_nested(f.type) for f in data.schema):
        return options
    keep = [
        f.name
        for f in data.schema
        if pa.types.is_dictionary(f.type)
        or len(pc.unique(data.column(f.name))) <= DICTIONARY_MAX_DISTINCT * rows
    ]
    if len(keep) == len(data.schema):
        return options  # every column repeats: pyarrow's default already encodes them all
    return dataclasses.replace(options, format_options={**chosen, "use_dictionary": keep})


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
