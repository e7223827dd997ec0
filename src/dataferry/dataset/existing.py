"""What a plain-directory data set already holds, read cheaply, and whether a write that keeps
it (``append``, ``overwrite-partitions``) fits it.

Readers take a data set's files as one table: pyarrow.dataset reads every file as the first
one's schema, polars and DuckDB globs need the same columns of the same types in every file
and the same ``col=value`` depth on every path. A write that adds files of another layout or
other types leaves a data set some or all of them cannot read, so it is refused on the
driver, before any task writes, naming the column (as the table committers refuse data that
differs from their table's schema, `commit/table/schemas.py`).

The data set is read cheaply: a few listings down to the first data file (its ``col=value``
directories are the layout) and that file's Parquet footer (two ranged reads).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..commit.base import Committer
from ..commit.protocol.inflight import INFLIGHT_SUFFIX
from ..commit.table.base import TableCommitter
from ..commit.table.footers import read_footer
from ..errors import CommitError, ConfigError, StoreError
from ..store import Store, paths

log = logging.getLogger("dataferry.dataset")

MAX_LISTINGS = 32  # directories listed looking for a data file (empty ones are skipped)
KEEPING_MODES = ("append", "overwrite-partitions")  # writes that keep files already there


@dataclass(frozen=True)
class ExistingData:
    """A data set's layout, as its first data file shows it.

    sample: the first data file found (relative to the destination).
    partition_by: the ``col=value`` directories above it, outermost first.
    schema: the Arrow schema of its Parquet footer (None: not Parquet, or unreadable).
    """

    sample: str
    partition_by: tuple[str, ...]
    schema: pa.Schema | None = None


def is_data_file(name: str, fmt: str) -> bool:
    """A file of a data set in `fmt`: named ``*.<fmt>`` (pyarrow, pandas, Spark, Dask), or
    without an extension (Hive's ``000000_0``). Others (a README, a ``.crc``) are not data."""
    return name.endswith("." + fmt) or "." not in name


def find_existing(
    store: Store, read_schema: bool = True, fmt: str = "parquet"
) -> ExistingData | None:
    """The first data file (`is_data_file`) of the destination, by name, depth first, and its
    layout; None when the destination holds no data file. Hidden names (``_SUCCESS``,
    ``_temporary``, ``.``-files) are not data, as readers skip them, nor in-flight names (a
    live job's)."""
    stack: list[tuple[str, tuple[str, ...]]] = [("", ())]
    listings = 0
    while stack and listings < MAX_LISTINGS:
        directory, columns = stack.pop()
        listings += 1
        entries = [
            e
            for e in store.list_or_empty(directory)
            if not paths.is_hidden(e.path) and not e.path.endswith(INFLIGHT_SUFFIX)
        ]
        files = [e for e in entries if not e.is_dir and is_data_file(e.name, fmt)]
        if files:
            sample = files[0].path
            schema = _footer_schema(store, sample) if read_schema else None
            return ExistingData(sample, columns, schema)
        for e in reversed([e for e in entries if e.is_dir]):
            column = e.name.partition("=")[0] if "=" in e.name else None
            stack.append((e.path, (*columns, column) if column else columns))
    return None


def _footer_schema(store: Store, path: str) -> pa.Schema | None:
    """The Arrow schema of a Parquet file's footer; None for a file that is not Parquet (a
    CSV data set, a stray file): its types are then not checked."""
    try:
        return read_footer(store, path)[1].schema.to_arrow_schema()
    except (CommitError, StoreError, OSError, pa.ArrowException) as e:
        log.debug("no Parquet schema in %s: %s", store.full_url(path), e)
        return None


def write_meaning(committer: Committer, mode: str) -> str:
    """What a write in the user's `mode` does to the files there, in the common modes' words
    (Hive's ``overwrite`` replaces the partitions written: ``overwrite-partitions``)."""
    return committer.mode_meanings.get(mode, mode)


def check_existing(
    store: Store,
    committer: Committer,
    mode: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    *,
    fmt: str = "parquet",
    schema_known: bool = True,
    schema_mode: str | None = None,
) -> ExistingData | None:
    """Refuse a write that keeps the data set's files (`mode` ``append`` or
    ``overwrite-partitions``) when its partition columns, or the types of its columns (a
    Parquet write, `schema` the data's with its partition columns, unless not
    `schema_known`), differ from the data set's; new or missing columns only with
    ``schema_mode="merge"``. Returns what it found
    (None: no data there, or a write that replaces it, or a table's committer, which
    checks against its own log)."""
    if isinstance(committer, TableCommitter):
        return None
    if schema_mode not in (None, "merge"):
        raise ConfigError(
            f"unknown schema_mode {schema_mode!r} for a plain data set; use None or 'merge'"
        )
    if write_meaning(committer, mode) not in KEEPING_MODES:
        return None
    found = find_existing(store, read_schema=schema_known and fmt == "parquet", fmt=fmt)
    if found is None:
        return None
    url = store.full_url()
    parts = tuple(partition_by)
    replace = replacing_mode(committer)
    if found.partition_by != parts:
        raise ConfigError(
            f"the data set at {url} is {_layout(found.partition_by)} (e.g. "
            f"{found.sample!r}) but the write is {_layout(parts)}: its files would leave a "
            "data set pyarrow, polars and DuckDB cannot read as one; write with "
            f"partition_by={list(found.partition_by)}, or with mode={replace!r}"
        )
    if found.schema is not None:
        data = pa.schema([f for f in schema if f.name not in parts])
        what = f"the data set at {url} ({found.sample!r})"
        _check_columns(what, found.schema, data, schema_mode, replace)
    return found


def replacing_mode(committer: Committer) -> str:
    """The user's name of the mode that replaces the whole data set (Hive's
    ``overwrite-table``; ``overwrite`` elsewhere)."""
    for mode, meaning in committer.mode_meanings.items():
        if meaning == "overwrite":
            return mode
    return "overwrite"


def _layout(columns: tuple[str, ...]) -> str:
    if not columns:
        return "not partitioned"
    return "partitioned by " + ", ".join(repr(c) for c in columns)


def same_type(t: pa.DataType) -> pa.DataType:
    """A type as every reader of a plain data set takes it: string and binary widths are
    one (pyarrow, pandas, polars and DuckDB read them together); no other difference is."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


def _check_columns(
    what: str, existing: pa.Schema, data: pa.Schema, schema_mode: str | None, replace: str
) -> None:
    """The first column of `data` that differs from `existing` by type, or (without
    ``schema_mode="merge"``) that one of them lacks."""
    there = {f.name: f.type for f in existing}
    merge = schema_mode == "merge"
    for f in data:
        if f.name not in there:
            if merge:
                continue
            raise ConfigError(
                f"column {f.name!r} is not in {what} (its columns: {', '.join(there)}); "
                "schema_mode='merge' adds it (pyarrow.dataset then reads every file; polars "
                "and DuckDB need their own options for files of other columns)"
            )
        if same_type(there[f.name]) != same_type(f.type):
            raise ConfigError(
                f"column {f.name!r} is {f.type} in the data but {there[f.name]} in {what}: "
                f"cast it (schema=...) to {there[f.name]}, or write with mode={replace!r}"
            )
    missing = [n for n in there if n not in data.names]
    if missing and not merge:
        raise ConfigError(
            f"the data has no column {missing[0]!r} of {what}; schema_mode='merge' writes "
            "files without it (read as nulls)"
        )


def writes_schema_file(store: Store, committer: Committer, mode: str, fmt: str = "parquet") -> bool:
    """Whether a write without rows writes one file holding the data's schema and no rows
    (as ``pandas.DataFrame.to_parquet`` writes an empty frame), at the destination's root,
    so that every reader finds the columns. Not for a table (its log holds the schema), nor
    a write that keeps a data set that is there (its files hold the schema already, and a
    file at the root would change a partitioned data set's layout), nor one that replaces
    only the partitions it writes (it writes none)."""
    if isinstance(committer, TableCommitter):
        return False
    meaning = write_meaning(committer, mode)
    if meaning in ("error", "overwrite"):
        return True
    if meaning == "append":
        return find_existing(store, read_schema=False, fmt=fmt) is None
    return False
