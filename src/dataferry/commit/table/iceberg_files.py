"""The Iceberg committer's data files: DataFiles built from the job's Parquet footers (each
read once, in parallel), with the table's field ids and its partition spec, and the checks
of data and partitioning against a table that exists.

Partition values come from each file's column bounds: an identity field's column holds one
value in the file, an order-preserving transform (`year`, `month`, `day`, `hour`,
`truncate[W]`) gives the same value at the column's minimum and maximum, and a `bucket[N]`
field's column holds one value (the bucket of a range of values cannot be known from its
bounds). A file that spans partitions is refused (ConfigError) before the commit: the table
never gets a DataFile with a wrong or null partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import ConfigError
from ..protocol import StageContext
from .footers import read_footer
from .schemas import check_same_schema as same_schema

# path in the store -> (size, footer)
Footers = dict[str, tuple[int, pq.FileMetaData]]


def read_footers(ctx: StageContext, paths: Iterable[str], cache: Footers) -> Footers:
    """Read the footers `cache` does not hold yet, in parallel through the job's I/O pool,
    into `cache` (each file's footer is read once per job commit, whatever the tries)."""
    missing = [p for p in dict.fromkeys(paths) if p not in cache]
    if missing:
        found = ctx.pool.map(lambda p: read_footer(ctx.store, p), missing, adaptive=True)
        cache.update(zip(missing, found, strict=True))
    return cache


def build_data_files(
    metadata: Any, paths: Sequence[str], footers: Footers, file_uri: Callable[[str], str]
) -> list[Any]:
    """DataFiles for the files at `paths` (their footers in `footers`), with the field ids
    and the default partition spec of the table `metadata` describes."""
    from pyiceberg.io import pyarrow as pio
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    table_schema, spec = metadata.schema(), metadata.spec()
    stats_columns = pio.compute_statistics_plan(table_schema, metadata.properties)
    bounds_columns = with_bounds_of_sources(stats_columns, spec)
    mapping = pio.parquet_path_to_id_mapping(table_schema)
    made = []
    for path in paths:
        size, meta = footers[path]
        stats = pio.data_file_statistics_from_parquet_metadata(meta, stats_columns, mapping)
        bounds = stats
        if bounds_columns is not stats_columns:
            bounds = pio.data_file_statistics_from_parquet_metadata(meta, bounds_columns, mapping)
        made.append(
            DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=file_uri(path),
                file_format=FileFormat.PARQUET,
                partition=partition_of(spec, table_schema, bounds, path),
                file_size_in_bytes=size,
                sort_order_id=None,
                spec_id=metadata.default_spec_id,
                equality_ids=None,
                key_metadata=None,
                **stats.to_serialized_dict(),
            )
        )
    return made


def with_bounds_of_sources(stats_columns: dict[int, Any], spec: Any) -> dict[int, Any]:
    """The statistics plan with full bounds for every partition source column (a table whose
    metrics mode is `none` or `counts` for one still gets its partition values); the plan
    itself if it has them already."""
    from pyiceberg.io.pyarrow import MetricModeTypes, MetricsMode

    full = MetricsMode(MetricModeTypes.FULL)
    sources = {f.source_id for f in spec.fields if f.source_id in stats_columns}
    weak = [s for s in sources if stats_columns[s].mode.type == MetricModeTypes.NONE]
    weak += [s for s in sources if stats_columns[s].mode.type == MetricModeTypes.COUNTS]
    if not weak:
        return stats_columns
    return {**stats_columns, **{s: replace(stats_columns[s], mode=full) for s in weak}}


def partition_of(spec: Any, schema: Any, stats: Any, path: str) -> Any:
    """The file's partition record (ConfigError if its rows lie in more than one)."""
    from pyiceberg.typedef import Record

    return Record(*[partition_value(f, schema, stats, path) for f in spec.fields])


def describe_field(field: Any, schema: Any) -> str:
    """`day` for an identity field on `day`, `day(ts)` for a day transform of `ts`."""
    name = schema.find_column_name(field.source_id)
    transform = str(field.transform)
    return name if transform == "identity" else f"{transform}({name})"


def partition_value(field: Any, schema: Any, stats: Any, path: str) -> Any:
    from pyiceberg.partitioning import partition_record_value
    from pyiceberg.transforms import IdentityTransform, VoidTransform

    transform = field.transform
    if isinstance(transform, VoidTransform) or stats.record_count == 0:
        return None
    source = schema.find_field(field.source_id)
    what = f"{describe_field(field, schema)} partition"
    nulls = stats.null_value_counts.get(field.source_id)
    if nulls is not None and nulls == stats.record_count:
        return None  # every row's value is null: the null partition
    agg = stats.column_aggregates.get(field.source_id)
    if agg is None or agg.current_min is None or agg.current_max is None or nulls is None:
        raise ConfigError(
            f"data file {path}: its footer has no bounds of column {source.name!r}, so its "
            f"{what} of the Iceberg table cannot be known"
        )
    if nulls:
        raise ConfigError(
            f"data file {path} holds null and non-null values of column {source.name!r}: rows "
            f"of two values of the table's {what} (give partition_by with {source.name!r})"
        )
    apply = transform.transform(source.field_type)
    low = apply(partition_record_value(field, agg.current_min, schema))
    high = apply(partition_record_value(field, agg.current_max, schema))
    one = low == high if transform.preserves_order else agg.current_min == agg.current_max
    if not one:
        human = transform.result_type(source.field_type)
        span = (
            f"from {transform.to_human_string(human, low)} to "
            f"{transform.to_human_string(human, high)}"
            if transform.preserves_order
            else f"values {agg.current_min!r} to {agg.current_max!r}"
        )
        identity = isinstance(transform, IdentityTransform)
        hint = (
            f"give partition_by with {source.name!r}"
            if identity or not transform.preserves_order
            else f"write files that each lie in one {transform} of {source.name!r} (e.g. give "
            f"partition_by with {source.name!r}, or one input part per partition)"
        )
        raise ConfigError(
            f"data file {path} holds rows of more than one value of the Iceberg table's {what} "
            f"({span}): {hint}"
        )
    return low


def check_partition_by(url: str, schema: Any, spec: Any, partition_by: Sequence[str]) -> None:
    """Refuse a write whose partition columns cannot give the table's partition values:
    identity and bucket fields need their column among partition_by (one value per file);
    an order-preserving transform's column may be (else each file must lie in one value of
    it, checked at the job's commit)."""
    from pyiceberg.transforms import IdentityTransform, VoidTransform

    fields = [f for f in spec.fields if not isinstance(f.transform, VoidTransform)]
    columns = [schema.find_column_name(f.source_id) for f in fields]
    needed = [
        c
        for f, c in zip(fields, columns, strict=True)
        if isinstance(f.transform, IdentityTransform) or not f.transform.preserves_order
    ]
    needed = list(dict.fromkeys(needed))
    unknown = [c for c in partition_by if c not in columns]
    missing = [c for c in needed if c not in partition_by]
    if unknown or missing:
        described = [describe_field(f, schema) for f in fields]
        why = ""
        if any(not f.transform.preserves_order for f in fields):
            why = " (a bucket partition is computed from the one value of its column in a file)"
        raise ConfigError(
            f"Iceberg table {url} is partitioned by {described}; the write gives "
            f"partition_by={list(partition_by)}: give partition_by={needed}{why}"
        )


def in_partitions(old: list[Any], new: list[Any], spec_id: int) -> list[Any]:
    """The live files in the partitions the new files are in (what a partition overwrite
    replaces)."""
    written = {_key(f.partition) for f in new}
    same_spec = [f for f in old if getattr(f, "spec_id", spec_id) == spec_id]
    return [f for f in same_spec if _key(f.partition) in written]


def _key(record: Any) -> tuple[Any, ...]:
    return tuple(record[i] for i in range(len(record)))


def iceberg_ready(schema: pa.Schema) -> pa.Schema:
    """The data's schema as Iceberg takes it: dictionary columns as their values."""
    dicts = pa.types.is_dictionary
    return pa.schema([f.with_type(f.type.value_type) if dicts(f.type) else f for f in schema])


def check_same_schema(url: str, table: pa.Schema, data: pa.Schema) -> None:
    """Refuse data whose columns differ from the Iceberg table's, naming the first."""
    same_schema(f"Iceberg table {url}", table, data, _norm)


_SAME = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}
_SAME.update({t: pa.int32() for t in (pa.int8(), pa.int16(), pa.uint8(), pa.uint16())})
_SAME[pa.uint32()] = pa.int64()


def _norm(t: pa.DataType) -> pa.DataType:
    """An Arrow type as Iceberg stores it (string and binary widths, small ints, units)."""
    if pa.types.is_dictionary(t):
        return _norm(t.value_type)
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", t.tz and "UTC")
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_norm(t.value_type))
    return _SAME.get(t, pa.string() if pa.types.is_string_view(t) else t)
