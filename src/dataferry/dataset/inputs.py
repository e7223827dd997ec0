"""The data users hand to a write, as Arrow: tables in memory, or a stream of batches.

Accepted: a pyarrow Table, RecordBatch or RecordBatchReader, a `pyarrow.dataset.Dataset`, a
pandas DataFrame or Series, a polars DataFrame, Series or LazyFrame, a dict of columns (as
`pyarrow.table` takes it), anything that exports the Arrow C stream interface
(`__arrow_c_stream__`: DuckDB relations, ...), and a list or iterator of any of these. pandas
and polars are imported only if the data is theirs. Conversion goes through Arrow without
copying rows where Arrow allows (polars and Arrow share buffers).

A pandas index is kept as `pandas.DataFrame.to_parquet` keeps it (`index=None`): a RangeIndex
as metadata only, any other index (named, MultiIndex) as columns; `index=True` writes every
index as columns, `index=False` none. A RangeIndex kept as metadata gives its labels back only
to rows read in their written order, so when the rows are split by partition (which reorders
them) a RangeIndex other than the default 0, 1, 2, ... is written as a column instead (pandas'
own partitioned write gives such rows the wrong labels). A `schema` is what the data is
converted or cast to, as `pyarrow.Table.from_pandas` and `pyarrow.table` take it.

What is in memory already (a table, a data frame, a list) becomes one table the write can
plan its files over; everything else stays a stream, read once, batch by batch.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import ConfigError

ACCEPTED = (
    "a pyarrow Table, RecordBatch, RecordBatchReader or Dataset, a pandas or polars "
    "DataFrame or Series, a polars LazyFrame, a dict of columns, an object with "
    "__arrow_c_stream__, or a list or iterator of these"
)


@dataclass(frozen=True)
class InputOptions:
    """How user data becomes Arrow.

    index: a pandas index as `DataFrame.to_parquet(index=...)` writes it (None: a RangeIndex
        as metadata, others as columns; True: all as columns; False: none).
    schema: the Arrow schema the data is converted or cast to (None: the data's own).
    ordered: the rows keep their order in the files (no partition columns), so a RangeIndex
        kept as metadata names the right rows.
    """

    index: bool | None = None
    schema: pa.Schema | None = None
    ordered: bool = True


def input_options(
    index: bool | None = None,
    preserve_index: bool | None = None,
    schema: Any = None,
    partition_by: tuple[str, ...] = (),
) -> InputOptions:
    """InputOptions from a write's arguments: pandas' `index`, pyarrow's `preserve_index`
    (the same, in pyarrow's name: give one), a `pyarrow.Schema`."""
    if index is not None and preserve_index is not None and index != preserve_index:
        raise ConfigError(
            f"give index or preserve_index, not both (index={index!r}, "
            f"preserve_index={preserve_index!r})"
        )
    chosen = index if index is not None else preserve_index
    if chosen is not None and not isinstance(chosen, bool):
        raise ConfigError(f"index must be True, False or None, got {chosen!r}")
    if schema is not None and not isinstance(schema, pa.Schema):
        raise ConfigError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    return InputOptions(index=chosen, schema=schema, ordered=not partition_by)


@dataclass
class Source:
    """The data of a write: `table` when it is all in memory, else `batches` (read once)."""

    schema: pa.Schema
    table: pa.Table | None = None
    batches: Iterator[pa.RecordBatch] | None = None

    @property
    def streamed(self) -> bool:
        return self.table is None


def as_source(data: Any, options: InputOptions | None = None) -> Source:
    """Arrow for any accepted input; ConfigError naming the type (or item) that is not."""
    options = options or InputOptions()
    table = _as_table(data, options, whole=True)
    if table is not None:
        return Source(table.schema, table=table)
    stream = _as_stream(data, options)
    if stream is not None:
        schema, batches = stream
        return Source(schema, batches=batches)
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise ConfigError(f"cannot write a {_type_name(data)}: data must be {ACCEPTED}")
    if isinstance(data, (list, tuple)):
        return _from_list(data, options)
    return _from_iterator(iter(data), options)


def _as_table(data: Any, options: InputOptions, whole: bool = False) -> pa.Table | None:
    """A table for data that is in memory already (no rows copied), else None. `whole`: the
    data is all of the write (not an item of a list or stream)."""
    schema = options.schema
    if isinstance(data, pa.Table):
        return cast_to(data, schema)
    if isinstance(data, pa.RecordBatch):
        return cast_to(pa.Table.from_batches([data]), schema)
    if isinstance(data, Mapping):
        return _from_dict(data, schema)
    if _is(data, "pandas", "DataFrame"):
        return _from_pandas(data, options, whole)
    if _is(data, "pandas", "Series"):
        return _from_pandas(data.to_frame(), options, whole)
    if _is(data, "polars", "DataFrame"):
        return cast_to(data.to_arrow(), schema)
    if _is(data, "polars", "Series"):
        return cast_to(data.to_frame().to_arrow(), schema)
    return None


def _as_stream(
    data: Any, options: InputOptions
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]] | None:
    """(schema, batches) for data that is read as a stream, else None."""
    if isinstance(data, pa.RecordBatchReader):
        found: tuple[pa.Schema, Iterator[pa.RecordBatch]] = (data.schema, iter(data))
    elif _is(data, "pyarrow.dataset", "Dataset"):
        found = data.schema, iter(data.to_batches())
    elif _is(data, "polars", "LazyFrame"):
        found = _from_lazyframe(data)
    elif hasattr(data, "__arrow_c_stream__"):
        try:
            reader = pa.RecordBatchReader.from_stream(data)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ConfigError(
                f"cannot write a {_type_name(data)}: its Arrow stream is not of rows ({e})"
            ) from e
        found = reader.schema, iter(reader)
    else:
        return None
    return _cast_stream(*found, options.schema)


def cast_to(table: pa.Table, schema: pa.Schema | None) -> pa.Table:
    """`table` as `schema` (as `pyarrow.table(table, schema=...)` casts it), or unchanged;
    a ConfigError naming the first column that does not cast."""
    if schema is None or table.schema.equals(schema, check_metadata=False):
        return table
    if table.column_names != schema.names:
        raise ConfigError(
            f"schema= has columns ({', '.join(schema.names)}) but the data has "
            f"({', '.join(table.column_names)}): give the data's columns, in its order"
        )
    columns = []
    for f in schema:
        try:
            columns.append(table.column(f.name).cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise ConfigError(
                f"column {f.name!r} is {table.schema.field(f.name).type} and does not cast "
                f"to {f.type} as schema= asks: {e}"
            ) from e
    return pa.Table.from_arrays(columns, schema=schema)


def _cast_stream(
    schema: pa.Schema, batches: Iterator[pa.RecordBatch], target: pa.Schema | None
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    if target is None or schema.equals(target, check_metadata=False):
        return schema, batches
    cast_to(schema.empty_table(), target)  # columns that cannot cast are named now

    def cast() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            yield from cast_to(table, target).to_batches()

    return target, cast()


def _from_dict(data: Mapping[Any, Any], schema: pa.Schema | None) -> pa.Table:
    """A dict of columns, as `pyarrow.table(dict, schema=...)` takes it."""
    try:
        return pa.table(dict(data), schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise ConfigError(f"a dict of columns does not convert to Arrow: {e}") from e


def _keep_index(df: Any, options: InputOptions, whole: bool) -> bool | None:
    """`preserve_index` for a pandas frame (see the module's docstring)."""
    import pandas as pd

    if options.index is not None:
        return options.index
    index = df.index
    if not isinstance(index, pd.RangeIndex):
        return None  # columns, as pandas writes them
    if not whole:
        return False  # an item's own row numbers: the rows of a concatenation have others
    default = index.start == 0 and index.step == 1 and index.name is None
    if options.ordered or default:
        return None  # metadata only, as pandas writes it
    return True


def _from_pandas(df: Any, options: InputOptions, whole: bool) -> pa.Table:
    """A pandas frame's columns, and its index as `DataFrame.to_parquet` keeps it."""
    keep = _keep_index(df, options, whole)
    try:
        return pa.Table.from_pandas(df, schema=options.schema, preserve_index=keep)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
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


def _item_batches(
    item: Any, index: int, options: InputOptions
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    table = _as_table(item, options)
    if table is not None:
        return table.schema, iter(table.to_batches())
    stream = _as_stream(item, options)
    if stream is not None:
        return stream
    raise ConfigError(f"data item {index} is a {_type_name(item)}, not {ACCEPTED}")


def _from_list(items: list[Any] | tuple[Any, ...], options: InputOptions) -> Source:
    """A list is in memory already: one table of all its items (their buffers, not copies)."""
    if not items:
        if options.schema is not None:
            return Source(options.schema, table=options.schema.empty_table())
        raise ConfigError(
            "data is empty: no tables or batches to write (give schema= to write an empty data set)"
        )
    tables = []
    for i, item in enumerate(items):
        schema, batches = _item_batches(item, i, options)
        tables.append(pa.Table.from_batches(list(batches), schema=schema))
        _check_schema(tables[0].schema, schema, i)
    return Source(tables[0].schema, table=pa.concat_tables(tables))


def _from_iterator(items: Iterator[Any], options: InputOptions) -> Source:
    """An iterator is read once, as it is produced: its first item gives the schema (or
    `options.schema`, which an empty iterator then writes)."""
    first = next(items, None)
    if first is None:
        if options.schema is not None:
            return Source(options.schema, batches=iter(()))
        raise ConfigError(
            "data is empty: no tables or batches to write (give schema= to write an empty data set)"
        )
    schema, head = _item_batches(first, 0, options)

    def batches() -> Iterator[pa.RecordBatch]:
        yield from head
        for i, item in enumerate(items, start=1):
            item_schema, rest = _item_batches(item, i, options)
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
