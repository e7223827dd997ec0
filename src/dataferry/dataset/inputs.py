"""The data users hand to a write, as Arrow: tables in memory, or a stream of batches.

Accepted: a pyarrow Table, RecordBatch or RecordBatchReader, a `pyarrow.dataset.Dataset`, a
pandas DataFrame, a polars DataFrame or LazyFrame, anything that exports the Arrow C stream
interface (`__arrow_c_stream__`: DuckDB relations, ...), and a list or iterator of any of
these. pandas and polars are imported only if the data is theirs. Conversion goes through
Arrow without copying rows where Arrow allows (polars and Arrow share buffers).

What is in memory already (a table, a data frame, a list) becomes one table the write can
plan its files over; everything else stays a stream, read once, batch by batch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import ConfigError

ACCEPTED = (
    "a pyarrow Table, RecordBatch, RecordBatchReader or Dataset, a pandas or polars "
    "DataFrame, a polars LazyFrame, an object with __arrow_c_stream__, or a list or "
    "iterator of these"
)


@dataclass
class Source:
    """The data of a write: `table` when it is all in memory, else `batches` (read once)."""

    schema: pa.Schema
    table: pa.Table | None = None
    batches: Iterator[pa.RecordBatch] | None = None

    @property
    def streamed(self) -> bool:
        return self.table is None


def as_source(data: Any) -> Source:
    """Arrow for any accepted input; ConfigError naming the type (or item) that is not."""
    table = _as_table(data)
    if table is not None:
        return Source(table.schema, table=table)
    stream = _as_stream(data)
    if stream is not None:
        schema, batches = stream
        return Source(schema, batches=batches)
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise ConfigError(f"cannot write a {_type_name(data)}: data must be {ACCEPTED}")
    if isinstance(data, (list, tuple)):
        return _from_list(data)
    return _from_iterator(iter(data))


def _as_table(data: Any) -> pa.Table | None:
    """A table for data that is in memory already (no rows copied), else None."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if _is(data, "pandas", "DataFrame"):
        return _from_pandas(data)
    if _is(data, "polars", "DataFrame"):
        return data.to_arrow()
    return None


def _as_stream(data: Any) -> tuple[pa.Schema, Iterator[pa.RecordBatch]] | None:
    """(schema, batches) for data that is read as a stream, else None."""
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data)
    if _is(data, "pyarrow.dataset", "Dataset"):
        return data.schema, iter(data.to_batches())
    if _is(data, "polars", "LazyFrame"):
        return _from_lazyframe(data)
    if hasattr(data, "__arrow_c_stream__"):
        reader = pa.RecordBatchReader.from_stream(data)
        return reader.schema, iter(reader)
    return None


def _from_pandas(df: Any) -> pa.Table:
    """A pandas frame's columns; its index too unless it is the default RangeIndex (which
    carries no data), as `DataFrame.to_parquet` keeps it."""
    import pandas as pd

    keep_index = not isinstance(df.index, pd.RangeIndex)
    try:
        return pa.Table.from_pandas(df, preserve_index=keep_index)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ConfigError(f"pandas DataFrame cannot be converted to Arrow: {e}") from e


def _from_lazyframe(lf: Any) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """A LazyFrame runs on polars' streaming engine, one Arrow batch at a time."""
    frames = lf.collect_batches() if hasattr(lf, "collect_batches") else iter([lf.collect()])
    first = next(iter(frames), None)
    if first is None:
        schema = lf.head(0).collect().to_arrow().schema
        return schema, iter(())
    head = first.to_arrow()

    def batches() -> Iterator[pa.RecordBatch]:
        yield from head.to_batches()
        for frame in frames:
            yield from frame.to_arrow().to_batches()

    return head.schema, batches()


def _item_batches(item: Any, index: int) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    table = _as_table(item)
    if table is not None:
        return table.schema, iter(table.to_batches())
    stream = _as_stream(item)
    if stream is not None:
        return stream
    raise ConfigError(f"data item {index} is a {_type_name(item)}, not {ACCEPTED}")


def _from_list(items: list[Any] | tuple[Any, ...]) -> Source:
    """A list is in memory already: one table of all its items (their buffers, not copies)."""
    if not items:
        raise ConfigError("data is empty: no tables or batches to write")
    tables = []
    for i, item in enumerate(items):
        schema, batches = _item_batches(item, i)
        tables.append(pa.Table.from_batches(list(batches), schema=schema))
        _check_schema(tables[0].schema, schema, i)
    return Source(tables[0].schema, table=pa.concat_tables(tables))


def _from_iterator(items: Iterator[Any]) -> Source:
    """An iterator is read once, as it is produced: its first item gives the schema."""
    first = next(items, None)
    if first is None:
        raise ConfigError("data is empty: no tables or batches to write")
    schema, head = _item_batches(first, 0)

    def batches() -> Iterator[pa.RecordBatch]:
        yield from head
        for i, item in enumerate(items, start=1):
            item_schema, rest = _item_batches(item, i)
            _check_schema(schema, item_schema, i)
            yield from rest

    return Source(schema, batches=batches())


def _check_schema(expected: pa.Schema, got: pa.Schema, index: int) -> None:
    if not got.equals(expected, check_metadata=False):
        raise ConfigError(
            f"data item {index} has schema ({_fields(got)}), not the first item's "
            f"({_fields(expected)})"
        )


def _fields(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


def _is(obj: Any, module: str, cls: str) -> bool:
    """isinstance without importing an optional library the data cannot be from."""
    mod = sys.modules.get(module)
    kind = getattr(mod, cls, None) if mod is not None else None
    return isinstance(kind, type) and isinstance(obj, kind)


def _type_name(obj: Any) -> str:
    t = type(obj)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
