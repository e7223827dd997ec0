"""Writes into tables in the words their own libraries use: `write_deltalake` as deltalake
(delta-rs) names its arguments, translated onto `write_dataset(..., committer="delta")`.

deltalake's vocabulary, and what it becomes:

    table_or_uri    a path or URL, or a `deltalake.DeltaTable` (its `table_uri`, and its
                    storage options unless others are given): the destination
    mode            "error", "append", "overwrite" as dataferry's; "ignore": nothing is
                    written when the table exists (decided again if it appears meanwhile)
    storage_options object_store's options (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, ...): given
                    to deltalake as they are, and, for an `s3://` table, to the store in
                    s3fs's names (key, secret, token, endpoint_url, region)
    name, description, configuration, schema_mode
                    the Delta committer's options (`DeltaConfig`); schema_mode "overwrite"
                    (with mode "overwrite") replaces the table's schema and partitioning
    partition_by    None: an existing table's partitioning (as deltalake takes it)
    predicate       with mode "overwrite": replace where, on partition columns (the files
                    of the partitions it selects are replaced; every row written must
                    match it)
    writer_properties, commit_properties, post_commithook_properties
                    deltalake's objects, read by `delta_args.py` into the Parquet writer's
                    and the committer's options
    target_file_size
                    write_dataset's own (bytes, as deltalake's)

The Dask and Ray forms (`dataferry.dask.write_deltalake`, `dataferry.ray.DeltaDatasink`)
translate through `delta_write` too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..errors import ConfigError, DestinationError
from .delta_args import commit_options, post_commit_options, writer_options
from .params import write_params

R = TypeVar("R")

# deltalake's write modes -> dataferry's ("ignore" writes with "error", and an existing
# table makes it a no-op)
DELTA_MODES = {"error": "error", "append": "append", "overwrite": "overwrite", "ignore": "error"}

# object_store's S3 options (upper case, as deltalake documents them; lower case is taken
# too) -> s3fs's storage options, which the store takes
_S3FS_NAMES = {
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_SESSION_TOKEN": "token",
    "AWS_ENDPOINT_URL": "endpoint_url",
    "AWS_ENDPOINT": "endpoint_url",
}
_S3FS_REGION = ("AWS_REGION", "AWS_DEFAULT_REGION")


@dataclass(frozen=True)
class DeltaWrite:
    """A write into a Delta table, in dataferry's terms.

    dest: the table's location (a path or URL).
    mode: dataferry's write mode.
    ignore: deltalake's "ignore": do nothing when the table exists.
    storage_options: the store's (s3fs's names), or None.
    committer_options: the Delta committer's (`DeltaConfig`'s fields).
    """

    dest: str
    mode: str
    ignore: bool
    partition_by: tuple[str, ...] = ()
    storage_options: dict[str, Any] | None = None
    committer_options: dict[str, Any] = field(default_factory=dict)
    writer_options: dict[str, Any] = field(default_factory=dict)
    partition_given: bool = True  # False: the table's own partitioning, if it exists

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of `write_dataset` (and of the engines' forms of it)."""
        return {
            "partition_by": list(self.partition_by) or None,
            "committer": "delta",
            "mode": self.mode,
            "storage_options": self.storage_options,
            "committer_options": dict(self.committer_options),
        }


def delta_write(
    table_or_uri: Any,
    *,
    partition_by: str | Sequence[str] | None = None,
    mode: str = "error",
    storage_options: Mapping[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
    configuration: Mapping[str, str | None] | None = None,
    schema_mode: str | None = None,
    committer_options: Mapping[str, Any] | None = None,
    predicate: str | None = None,
    writer_properties: Any = None,
    commit_properties: Any = None,
    post_commithook_properties: Any = None,
) -> DeltaWrite:
    """deltalake's arguments as a `DeltaWrite` (ConfigError for one it does not take)."""
    if mode not in DELTA_MODES:
        raise ConfigError(f"unknown mode {mode!r}; use one of {', '.join(DELTA_MODES)}")
    if predicate is not None and mode != "overwrite":
        raise ConfigError(
            f"predicate= replaces the rows it selects, which only mode='overwrite' does (as in "
            f"deltalake), not mode={mode!r}"
        )
    uri, table_options = table_uri(table_or_uri)
    delta_options = dict(storage_options if storage_options is not None else table_options)
    options: dict[str, Any] = {
        **commit_options(commit_properties),
        **post_commit_options(post_commithook_properties),
        **dict(committer_options or {}),
    }
    if predicate is not None:
        options["predicate"] = predicate
    if delta_options:
        options["storage_options"] = {str(k): str(v) for k, v in delta_options.items()}
    if name is not None:
        options["name"] = name
    if description is not None:
        options["description"] = description
    if configuration is not None:
        options["configuration"] = {str(k): v for k, v in configuration.items()}
    if schema_mode is not None:
        options["schema_mode"] = schema_mode
    parts = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by or ())
    return DeltaWrite(
        dest=uri,
        mode=DELTA_MODES[mode],
        ignore=mode == "ignore",
        partition_by=parts,
        storage_options=store_options(uri, delta_options),
        committer_options=options,
        writer_options=writer_options(writer_properties),
        partition_given=partition_by is not None,
    )


def table_uri(table_or_uri: Any) -> tuple[str, dict[str, str]]:
    """The location of a path, URL or `deltalake.DeltaTable`, and the table's own storage
    options (none for a path)."""
    if isinstance(table_or_uri, (str, os.PathLike)):
        return os.fspath(table_or_uri), {}
    uri = getattr(table_or_uri, "table_uri", None)
    if not isinstance(uri, str):
        raise ConfigError(
            "table_or_uri must be a path, a URL or a deltalake.DeltaTable, got "
            f"{type(table_or_uri).__name__}"
        )
    return uri, dict(getattr(table_or_uri, "_storage_options", None) or {})


def store_options(uri: str, delta_options: Mapping[str, str]) -> dict[str, Any] | None:
    """The store's storage options (s3fs's names) for deltalake's `storage_options`: for an
    `s3://` table, its keys, endpoint and region; other locations take none (deltalake's
    options go to deltalake only)."""
    if not uri.startswith(("s3://", "s3a://")) or not delta_options:
        return None
    upper = {str(k).upper(): v for k, v in delta_options.items()}
    out: dict[str, Any] = {}
    for key, s3fs_name in _S3FS_NAMES.items():
        if upper.get(key):
            out.setdefault(s3fs_name, str(upper[key]))
    region = next((upper[k] for k in _S3FS_REGION if upper.get(k)), None)
    if region:
        out["client_kwargs"] = {"region_name": str(region)}
    return out or None


def delta_table_exists(spec: DeltaWrite) -> bool:
    """Whether the write's destination holds a Delta table (asked through the committer, so
    the location is the one the write would commit to)."""
    from ..commit.factory import make_committer
    from .write import open_destination

    store = open_destination(spec.dest, None, spec.storage_options)
    committer = make_committer("delta", store, mode="append", **spec.committer_options)
    return bool(committer.table_exists())


def table_partitioning(spec: DeltaWrite) -> tuple[str, ...] | None:
    """The partition columns of the table at the write's destination (None: no table)."""
    from ..commit.factory import make_committer
    from .write import open_destination

    store = open_destination(spec.dest, None, spec.storage_options)
    committer = make_committer("delta", store, mode="append", **spec.committer_options)
    table = committer.table()
    return None if table is None else tuple(table.metadata().partition_columns)


def resolved(spec: DeltaWrite) -> DeltaWrite:
    """The write with deltalake's defaults that depend on the table: no partition_by given
    takes an existing table's partitioning (except where schema_mode="overwrite" replaces
    it, where deltalake too keeps it unless told)."""
    if spec.partition_given:
        return spec
    parts = table_partitioning(spec)
    return spec if parts is None else replace(spec, partition_by=parts, partition_given=True)


def run_delta_write(spec: DeltaWrite, write: Callable[..., R]) -> R | None:
    """`write(**spec.arguments())`, or None for mode "ignore" on a table that exists (also
    when the table appeared while the write ran: its job then found it and wrote nothing)."""
    if spec.ignore and delta_table_exists(spec):
        return None
    spec = resolved(spec)
    try:
        return write(**spec.arguments())
    except DestinationError:
        if spec.ignore and delta_table_exists(spec):
            return None
        raise


@write_params("write_deltalake")
def write_deltalake(
    table_or_uri: Any,
    data: Any,
    *,
    partition_by: str | Sequence[str] | None = None,
    mode: str = "error",
    storage_options: dict[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
    configuration: dict[str, str | None] | None = None,
    schema_mode: str | None = None,
    predicate: str | None = None,
    writer_properties: Any = None,
    commit_properties: Any = None,
    post_commithook_properties: Any = None,
    engine: Any = None,
    **options: Any,
) -> Any:
    """Write `data` into a Delta table as `deltalake.write_deltalake` does, committed by
    dataferry: tasks write the data files in place, the job commits one Delta transaction
    (exactly once: an application transaction carries the job's id), and a failed write
    leaves the table as it was, without a file of its own.

    Parameters
    ----------
    data
        What `dataferry.write_dataset` takes: a pyarrow Table, RecordBatchReader or
        dataset, a pandas or polars DataFrame, an Arrow stream, ...
    engine
        The engine of `dataferry.write_dataset` (None: the embedded engine on threads).
    **options
        Other arguments of `dataferry.write_dataset` (``target_file_size``,
        ``max_rows_per_file``, ``compression``, ``committer_options`` such as
        ``commit_retries``, ...).

    Returns
    -------
    WriteResult or None
        What the job wrote; None when ``mode="ignore"`` found the table.
    """
    from .write import write_dataset

    spec = delta_write(
        table_or_uri,
        partition_by=partition_by,
        mode=mode,
        storage_options=storage_options,
        name=name,
        description=description,
        configuration=configuration,
        schema_mode=schema_mode,
        committer_options=options.pop("committer_options", None),
        predicate=predicate,
        writer_properties=writer_properties,
        commit_properties=commit_properties,
        post_commithook_properties=post_commithook_properties,
    )
    loose = {**spec.writer_options, **options}
    return run_delta_write(
        spec, lambda **given: write_dataset(data, spec.dest, engine=engine, **given, **loose)
    )


def write_deltalake_frame(
    ddf: Any,
    table_or_uri: Any,
    *,
    write_index: bool | None = None,
    schema: Any = "infer",
    compute_kwargs: dict[str, Any] | None = None,
    **delta: Any,
) -> Any:
    """`write_deltalake` of a Dask DataFrame, as one Dask graph on any scheduler (that of
    `dataferry.dask.to_parquet`). `delta`: the arguments of `delta_write`; other keywords
    are the write's options (sizes, writer options)."""
    from ..dask.write import write_graph
    from .options import translate

    names = {"partition_by", "mode", "storage_options", "name", "description"}
    names |= {"configuration", "schema_mode", "committer_options", "predicate"}
    names |= {"writer_properties", "commit_properties", "post_commithook_properties"}
    spec = delta_write(table_or_uri, **{k: v for k, v in delta.items() if k in names})
    loose = {**spec.writer_options, **{k: v for k, v in delta.items() if k not in names}}

    def write(**given: Any) -> Any:
        request = translate(
            "dask.write_dataset", {"dest": spec.dest, **given, "writer_options": loose}
        )
        return write_graph(
            ddf, request, write_index=write_index, schema=schema, compute_kwargs=compute_kwargs
        )

    return run_delta_write(spec, write)


__all__ = [
    "DELTA_MODES",
    "DeltaWrite",
    "delta_table_exists",
    "delta_write",
    "run_delta_write",
    "write_deltalake",
    "write_deltalake_frame",
]
