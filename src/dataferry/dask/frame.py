"""A Dask DataFrame's partitions as Arrow rows: which columns a write has (the index
included or not, as Dask's ``write_index``), their types (Dask's ``schema=``), Dask's
``filesystem=`` names, and a partition's write task (`WriteSpec`). Used by both Dask writes
(`write.py`)."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ..commit.base import Committer
from ..dataset.existing import writes_schema_file
from ..dataset.options import WriteOptions, WriteRequest
from ..dataset.task import write_rows, write_schema_file
from ..engine.attempt import TaskOutput
from ..errors import ConfigError

# Dask's column name for an unnamed index (dask.dataframe.io.parquet.core.NONE_LABEL)
NONE_LABEL = "__null_dask_index__"


def index_is_written(meta: Any, write_index: bool | None) -> bool:
    """Whether a frame's index becomes a column: `write_index` if given; for None, unless it
    is the default row number (an unnamed integer index, as Dask's partitions of a
    RangeIndex are). Decided from the frame's `_meta`, so every partition does the same."""
    if write_index is not None:
        return bool(write_index)
    import pandas as pd

    index = meta.index
    named = any(name is not None for name in index.names)
    return named or not pd.api.types.is_integer_dtype(index.dtype)


def _name_index(pdf: Any) -> Any:
    """An unnamed single index takes Dask's name for it (`__null_dask_index__`)."""
    if pdf.index.nlevels == 1 and pdf.index.name is None:
        return pdf.rename_axis(NONE_LABEL)
    return pdf


@dataclass(frozen=True)
class FrameSpec:
    """How a partition (a pandas DataFrame) becomes Arrow rows.

    schema: every partition is converted to this schema (None: each to its own, as Dask's
        ``schema=None``).
    write_index: the index becomes a column (named, or ``__null_dask_index__``).
    """

    schema: pa.Schema | None
    write_index: bool = False

    def to_table(self, pdf: Any) -> pa.Table:
        if self.write_index:
            pdf = _name_index(pdf)
        try:
            return pa.Table.from_pandas(pdf, schema=self.schema, preserve_index=self.write_index)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ConfigError(
                f"a partition does not convert to the write's schema ({e}); "
                "give the column types with schema={'column': pyarrow type}"
            ) from e


def frame_spec(ddf: Any, write_index: bool | None, schema: Any = "infer") -> FrameSpec:
    """The FrameSpec of a Dask DataFrame, from its `_meta` (no data is read unless a column's
    type cannot be told from it: an ``object`` column of ``schema="infer"`` is sampled from
    the first partitions, as Dask does).

    schema: ``"infer"``, None, a ``pyarrow.Schema`` (used as is), or a dict of column name to
        pyarrow type overriding the inferred types of those columns.
    """
    keep = index_is_written(ddf._meta, write_index)
    if schema is None:
        return FrameSpec(None, keep)
    if isinstance(schema, pa.Schema):
        return FrameSpec(schema, keep)
    if not (schema == "infer" or isinstance(schema, Mapping)):
        raise ConfigError(
            f"schema must be 'infer', None, a pyarrow.Schema or a dict, got {schema!r}"
        )
    meta = _name_index(ddf._meta) if keep else ddf._meta
    try:
        inferred = pa.Schema.from_pandas(meta, preserve_index=keep)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ConfigError(f"the frame's columns have no Arrow type ({e}); pass schema=") from e
    overrides = dict(schema) if isinstance(schema, Mapping) else {}
    unknown = set(overrides) - set(inferred.names)
    if unknown:
        raise ConfigError(f"schema names columns the frame does not have: {sorted(unknown)}")
    untyped = [f.name for f in inferred if pa.types.is_null(f.type) and f.name not in overrides]
    if untyped:
        overrides.update(_sample_types(ddf, untyped))
    for name, typ in overrides.items():
        i = inferred.get_field_index(name)
        inferred = inferred.set(i, pa.field(name, typ))
    return FrameSpec(inferred, keep)


def _sample_types(ddf: Any, columns: list[str]) -> dict[str, pa.DataType]:
    """Arrow types of `object` columns, from the first partitions that hold a value."""
    found: dict[str, pa.DataType] = {}
    columns = [c for c in columns if c in ddf.columns]
    for i in range(ddf.npartitions):
        if len(found) == len(columns):
            break
        sample = ddf[columns].partitions[i].compute()
        types = pa.Schema.from_pandas(sample, preserve_index=False)
        for f in types:
            if f.name not in found and not pa.types.is_null(f.type):
                found[f.name] = f.type
    return found


def schema_of(ddf: Any, frame: FrameSpec) -> Any:
    """The columns a write will have (for checking the partition columns, and a table's
    schema), the index among them when it is written."""
    if frame.schema is not None:
        return frame.schema
    meta = _name_index(ddf._meta) if frame.write_index else ddf._meta
    return pa.Schema.from_pandas(meta, preserve_index=frame.write_index)


def dask_filesystem(path: str | os.PathLike[str], filesystem: Any) -> tuple[Any, Any]:
    """(destination, file system) for Dask's ``filesystem`` names: "fsspec" (or None) means
    the one the URL implies, "arrow" pyarrow's file system for it, an object itself."""
    if filesystem is None or filesystem == "fsspec":
        return path, None
    if filesystem == "arrow":
        import pyarrow.fs as pafs

        fs, inner = pafs.FileSystem.from_uri(os.fspath(path))
        return inner, fs
    if isinstance(filesystem, str):
        raise ConfigError(
            f"filesystem must be 'fsspec', 'arrow' or a file system, got {filesystem!r}"
        )
    return path, filesystem


def write_frame(
    pdf: Any,
    partition_by: tuple[str, ...],
    options: WriteOptions,
    frame: FrameSpec,
    out: TaskOutput,
    schema_file: bool = False,
    add_keys: Any = None,
) -> dict[str, Any]:
    """One partition as one task's output (its rows, split by the partition columns). With
    `schema_file`, the first partition writes a file of the schema when it has no rows (as
    Dask writes a file for each partition, empty ones too), so that a frame without rows
    leaves readers its columns. `add_keys`: the committer's derived partition keys
    (`PartitionKeys.add`), added before the split."""
    table = frame.to_table(pdf)
    if add_keys is not None:
        table = add_keys(table)
    if schema_file and table.num_rows == 0 and out.task_index == 0:
        return write_schema_file(out, table.schema, options)
    return write_rows(out, table.schema, partition_by, options, [table])


@dataclass(frozen=True)
class WriteSpec:
    """What every write task of a job shares. schema_file: an empty first partition writes
    a file of the schema (an unpartitioned write that does not keep a data set there, see
    `existing.writes_schema_file`; a partitioned one writes nothing, as Dask does)."""

    partition_by: tuple[str, ...]
    options: WriteOptions
    frame: FrameSpec
    schema_file: bool = False
    add_keys: Any = None  # the committer's `PartitionKeys.add` (then partition_by is its)

    def work(self, pdf: Any) -> functools.partial:
        """A partition as a task's work."""
        return functools.partial(
            write_frame,
            pdf,
            self.partition_by,
            self.options,
            self.frame,
            schema_file=self.schema_file,
            add_keys=self.add_keys,
        )

    def keyed(self, committer: Committer, schema: pa.Schema) -> WriteSpec:
        """The spec splitting as the committer partitions (`Committer.partition_keys`)."""
        keys = committer.partition_keys(schema, self.partition_by)
        if keys is None:
            return self
        return replace(self, partition_by=keys.partition_by, add_keys=keys.add)


def empty_schema_file(store: Any, committer: Committer, request: WriteRequest) -> bool:
    """Whether an empty first partition writes a file of the schema (`WriteSpec`)."""
    if request.partition_by:
        return False
    return writes_schema_file(store, committer, request.mode, request.options.format)
