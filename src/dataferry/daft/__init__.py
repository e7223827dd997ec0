"""Daft integration: committed writes of Daft DataFrames, built on the public job session.

- `write_dataset(df, dest, ...)`: the options of `dataferry.write_dataset`, through any
  committer (tables included), all or nothing; a failed write is aborted.
- `write_deltalake(df, table_or_uri, ...)`: a Delta table written with deltalake's arguments.
- `CommitSink(dest, ...)`: the Daft `DataSink` both use, for ``df.write_sink(sink)``
  (``with sink:`` around it aborts the job of a failed write, as Daft has no failure hook).

Daft is an optional dependency: ``pip install 'dataferry[daft]'``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..dataset.params import write_params
from ..dataset.tables import delta_write, run_delta_write
from ..dataset.write import WriteResult
from ..errors import ConfigError
from ..extras import require
from ..store import Store
from .sink import CommitSink

if TYPE_CHECKING:
    import daft


@write_params("daft.write_dataset")
def write_dataset(
    df: daft.DataFrame,
    dest: str | os.PathLike[str] | Store,
    *,
    partition_by: Sequence[str] | None = None,
    format: str = "parquet",
    committer: str = "auto",
    mode: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **options: Any,
) -> WriteResult:
    """Write a Daft DataFrame as a committed, partitioned data set (or table) at `dest`.

    Each Daft write call (a stream of micropartitions on a worker) is one task attempt; the
    job commits once every call is done, from the results Daft kept, so a retried or lost
    call is never counted twice. A failure anywhere aborts the job: nothing of it stays
    visible.

    Parameters
    ----------
    df
        The Daft DataFrame.
    **options
        The rest of `CommitSink`'s (``committer_options``, sizes, writer options,
        ``filesystem``, ...).

    Returns
    -------
    WriteResult
        The destination, the committer, rows, files, bytes, partitions and the job's run.
    """
    frame_type = require("daft", "dataferry.daft").DataFrame
    if not isinstance(df, frame_type):
        raise ConfigError(
            f"dataferry.daft.write_dataset takes a daft.DataFrame, got {type(df).__name__}; "
            "for Arrow, pandas or polars data use dataferry.write_dataset"
        )
    sink = CommitSink(
        dest,
        partition_by=partition_by,
        format=format,
        committer=committer,
        mode=mode,
        storage_options=storage_options,
        schema=df.schema(),
        **options,
    )
    with sink:  # a failed write_sink aborts the job
        df.write_sink(sink)
    assert sink.result is not None
    return sink.result


@write_params("daft.write_deltalake")
def write_deltalake(
    df: daft.DataFrame,
    table_or_uri: Any,
    *,
    partition_by: str | Sequence[str] | None = None,
    mode: str = "error",
    storage_options: dict[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
    configuration: dict[str, str | None] | None = None,
    schema_mode: str | None = None,
    committer_options: dict[str, Any] | None = None,
    predicate: str | None = None,
    writer_properties: Any = None,
    commit_properties: Any = None,
    post_commithook_properties: Any = None,
    **options: Any,
) -> WriteResult | None:
    """Write a Daft DataFrame into a Delta table with `deltalake.write_deltalake`'s
    arguments (see `dataferry.write_deltalake`): each write call's files in place, one Delta
    transaction at the end. Returns the WriteResult, or None when ``mode="ignore"`` found
    the table.

    Parameters
    ----------
    df
        The Daft DataFrame.
    **options
        The write's sizes and writer options, as in `write_dataset`.
    """
    require("daft", "dataferry.daft")
    spec = delta_write(
        table_or_uri,
        partition_by=partition_by,
        mode=mode,
        storage_options=storage_options,
        name=name,
        description=description,
        configuration=configuration,
        schema_mode=schema_mode,
        committer_options=committer_options,
        predicate=predicate,
        writer_properties=writer_properties,
        commit_properties=commit_properties,
        post_commithook_properties=post_commithook_properties,
    )
    loose = {**spec.writer_options, **options}
    return run_delta_write(spec, lambda **given: write_dataset(df, spec.dest, **given, **loose))


__all__ = ["CommitSink", "write_dataset", "write_deltalake"]
