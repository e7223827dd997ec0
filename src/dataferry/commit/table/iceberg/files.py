"""The Iceberg committer's data files: DataFiles built from the job's Parquet footers (each
read once, in parallel), with the table's field ids and its partition spec, and the checks
of data and partitioning against the table (one that exists, or the one a job creates, built
in memory first: `new_metadata`).

Partition values come from each file's column bounds: an identity field's column holds one
value in the file, an order-preserving transform (`year`, `month`, `day`, `hour`,
`truncate[W]`) gives the same value at the column's minimum and maximum, and a `bucket[N]`
field's value is the one of the `id_bucket_N=3` directory dataferry split the rows into
(`partitions.py`), else its column must hold one value (the bucket of a range of
values cannot be known from its bounds). A file that spans partitions, or whose bounds show
rows of another partition than its directory names, is refused (ConfigError) before the
commit: the table never gets a DataFile with a wrong or null partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ....errors import ConfigError
from ...protocol import StageContext
from ..footers import read_footer
from ..layout import partition_values
from ..schemas import check_same_schema as same_schema
from .partitions import describe_field
from .types import arrow_types, file_schema, iceberg_schema, plain

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
    build = FileBuilder(metadata.schema(), metadata.spec(), metadata.properties)
    made = []
    for path in paths:
        size, meta = footers[path]
        stats, partition = build.parts(path, meta)
        made.append(data_file(file_uri(path), size, partition, metadata.default_spec_id, stats))
    return made


class FileBuilder:
    """What a DataFile holds of one Parquet file besides its path, size and spec id, for a
    table of Iceberg schema `schema`, spec `spec` and `properties` (the metrics kept)."""

    def __init__(self, schema: Any, spec: Any, properties: dict[str, str]) -> None:
        from pyiceberg.io import pyarrow as pio

        self.schema, self.spec = schema, spec
        self.types = arrow_types(schema)
        self.stats_columns = pio.compute_statistics_plan(schema, properties)
        self.bounds_columns = with_bounds_of_sources(self.stats_columns, spec)
        self.mapping = pio.parquet_path_to_id_mapping(schema)

    def parts(self, path: str, meta: pq.FileMetaData) -> tuple[dict[str, Any], Any]:
        """The file's statistics (as `DataFile.from_args` takes them) and its partition
        record; ConfigError for a file the table cannot take."""
        from pyiceberg.io import pyarrow as pio

        check_file_types(path, meta, self.types)
        stats = pio.data_file_statistics_from_parquet_metadata(
            meta, self.stats_columns, self.mapping
        )
        bounds = stats
        if self.bounds_columns is not self.stats_columns:
            bounds = pio.data_file_statistics_from_parquet_metadata(
                meta, self.bounds_columns, self.mapping
            )
        dirs = partition_values(path, 1)
        partition = partition_of(self.spec, self.schema, bounds, path, dirs)
        return stats.to_serialized_dict(), partition


def data_file(uri: str, size: int, partition: Any, spec_id: int, stats: dict[str, Any]) -> Any:
    """A Parquet DataFile of the table (`stats`: `FileBuilder.parts`')."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=uri,
        file_format=FileFormat.PARQUET,
        partition=partition,
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=spec_id,
        equality_ids=None,
        key_metadata=None,
        **stats,
    )


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


def partition_of(
    spec: Any, schema: Any, stats: Any, path: str, dirs: dict[str, str | None] | None = None
) -> Any:
    """The file's partition record (ConfigError if its rows lie in more than one). `dirs`:
    the `name=value` directories of its path (`partitions.py`)."""
    from pyiceberg.typedef import Record

    dirs = dirs or {}
    return Record(*[partition_value(f, schema, stats, path, dirs) for f in spec.fields])


def partition_value(
    field: Any, schema: Any, stats: Any, path: str, dirs: dict[str, str | None]
) -> Any:
    """The file's value of one spec field: from its column's bounds (one value at both ends,
    for an order-preserving transform), or for a bucket, from the `name=value` directory
    dataferry split it into by that bucket (`dirs`); ConfigError when the bounds show rows of
    another value than the directory's, or of several values."""
    from pyiceberg.transforms import IdentityTransform, VoidTransform

    transform = field.transform
    if isinstance(transform, VoidTransform) or stats.record_count == 0:
        return None
    keyed = not isinstance(transform, IdentityTransform) and field.name in dirs
    if keyed and not transform.preserves_order:
        return keyed_value(field, schema, stats, path, dirs[field.name])
    value = bounds_value(field, schema, stats, path)
    if keyed:
        check_directory(field, schema, path, value, dirs[field.name])
    return value


def keyed_value(field: Any, schema: Any, stats: Any, path: str, text: str | None) -> Any:
    """A bucket's value from the file's directory, checked against its bounds where they show
    one value (a file of one value of the column)."""
    from pyiceberg.partitioning import partition_record_value

    value = None if text is None else int(text)
    agg = stats.column_aggregates.get(field.source_id)
    nulls = stats.null_value_counts.get(field.source_id)
    found: Any = value
    if nulls is not None and nulls == stats.record_count:
        found = None
    elif agg is not None and agg.current_min is not None and agg.current_min == agg.current_max:
        source = schema.find_field(field.source_id)
        apply = field.transform.transform(source.field_type)
        found = apply(partition_record_value(field, agg.current_min, schema))
    check_directory(field, schema, path, found, text)
    return value


def check_directory(field: Any, schema: Any, path: str, value: Any, text: str | None) -> None:
    """Refuse a file whose rows are in another partition than its directory names."""
    source = schema.find_field(field.source_id)
    human = field.transform.result_type(source.field_type)
    shown = None if value is None else field.transform.to_human_string(human, value)
    if shown != text:
        raise ConfigError(
            f"data file {path} lies in directory {field.name}={text} but its rows are in "
            f"{describe_field(field, schema)} {shown}: a file must lie in its own partition"
        )


def bounds_value(field: Any, schema: Any, stats: Any, path: str) -> Any:
    """A spec field's value from the file's bounds of its column."""
    from pyiceberg.partitioning import partition_record_value
    from pyiceberg.transforms import IdentityTransform

    transform = field.transform
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
    """Refuse partition columns the table is not partitioned by. The data is split by the
    table's spec whatever partition_by names (`partitions.partition_keys`), so
    partition_by may name some of its columns, all, or none."""
    from pyiceberg.transforms import VoidTransform

    fields = [f for f in spec.fields if not isinstance(f.transform, VoidTransform)]
    columns = [schema.find_column_name(f.source_id) for f in fields]
    unknown = [c for c in partition_by if c not in columns]
    if unknown:
        described = [describe_field(f, schema) for f in fields]
        raise ConfigError(
            f"Iceberg table {url} is partitioned by {described}; the write gives "
            f"partition_by={list(partition_by)}, and the table is not partitioned by "
            f"{unknown}: give partition_by={list(dict.fromkeys(columns))} (or none: the "
            "table's spec splits the data)"
        )


def in_partitions(old: list[Any], new: list[Any], spec_id: int) -> list[Any]:
    """The live files in the partitions the new files are in (what a partition overwrite
    replaces)."""
    written = {_key(f.partition) for f in new}
    same_spec = [f for f in old if getattr(f, "spec_id", spec_id) == spec_id]
    return [f for f in same_spec if _key(f.partition) in written]


def _key(record: Any) -> tuple[Any, ...]:
    return tuple(record[i] for i in range(len(record)))


def check_same_schema(url: str, table: Any, data: pa.Schema) -> None:
    """Refuse data whose columns differ from the Iceberg table's (`table`, its Iceberg
    schema), naming the first: a column the table lacks, or one whose type (as the type
    policy makes it, `types.py`) is neither the table's nor promoted to it."""
    types = arrow_types(table)
    files = file_schema(data, types)
    what = f"Iceberg table {url}"
    for f in data:
        kept = plain(files.field(f.name).type)
        if f.name in types and kept != types[f.name]:
            raise ConfigError(
                f"column {f.name!r} is {f.type} in the data (kept as {kept} in Iceberg) but "
                f"{types[f.name]} in {what}: cast the column to the table's type"
            )
    hint = "; pass committer_options={'schema_mode': 'merge'} to add it to the table"
    same_schema(what, pa.schema(list(types.items())), files, plain, hint)


def union_by_name(url: str, tx: Any, data: pa.Schema) -> None:
    """Evolve the schema of the table in transaction `tx` by name to take data of schema
    `data` (pyiceberg's `union_by_name`: new columns added as optional, types promoted by
    Iceberg's rules); in the transaction's metadata only, until it is committed.
    ConfigError naming the column when Iceberg cannot evolve the table to take it."""
    from pyiceberg.exceptions import ResolveError, ValidationError

    files = file_schema(data, arrow_types(tx.table_metadata.schema()))
    try:
        with tx.update_schema() as update:
            update.union_by_name(files)
    except (ValueError, TypeError, ValidationError, ResolveError) as e:
        raise ConfigError(
            f"Iceberg table {url} cannot take the data's columns by name (schema_mode='merge'): {e}"
        ) from None


def check_file_types(path: str, meta: pq.FileMetaData, table: dict[str, pa.DataType]) -> None:
    """Refuse a data file whose columns do not hold the table's types (a file written
    without the type policy, e.g. by a job that began before it): readers would find
    nanoseconds or unsigned values where the table's log says otherwise."""
    for f in meta.schema.to_arrow_schema():
        if f.name in table and plain(f.type) != table[f.name]:
            raise ConfigError(
                f"data file {path}: column {f.name!r} holds {f.type} where the Iceberg table "
                f"has {table[f.name]}; write it again (dataferry casts each column to the "
                "table's type as it writes)"
            )


def new_metadata(
    url: str,
    schema: pa.Schema,
    partition_by: Sequence[str],
    location: str,
    props: dict[str, str],
    spec_items: Sequence[tuple[str, str]] = (),
) -> Any:
    """The metadata of the table a job creates from data of file schema `schema`, built in
    memory as the catalog will build it (Iceberg types, the partition spec `spec_items`, else
    identity partitions of `partition_by`, properties): every check the creation makes,
    made before any task writes."""
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.transforms import IdentityTransform

    from .partitions import field_name, spec_fields

    ice = iceberg_schema(url, schema)
    if not spec_items:
        for column in partition_by:
            source = ice.find_field(column)
            if not IdentityTransform().can_transform(source.field_type):
                raise ConfigError(
                    f"partition column {column!r} is {source.field_type} in Iceberg table "
                    f"{url}: Iceberg partitions by values of primitive columns only; "
                    "partition by another"
                )
    items = list(spec_items) or [("identity", c) for c in partition_by]
    spec = PartitionSpec(*spec_fields(url, ice, items))
    if spec_items:  # partition_by as given (a job's directories also name its key columns)
        keys = {field_name(t, c) for t, c in spec_items if t != "identity"}
        check_partition_by(url, ice, spec, [c for c in partition_by if c not in keys])
    try:
        return new_table_metadata(ice, spec, UNSORTED_SORT_ORDER, location, props)
    except Exception as e:
        raise ConfigError(f"Iceberg table {url} cannot be created as the job asks: {e}") from None
