"""Iceberg partition specs as dataferry writes them: the `partition_spec` option (a spec given
at creation), and the key columns that split the data by the spec's transforms.

A spec is written as pyiceberg prints a partition field, one string per field, in order:

    "id" or "identity(id)"     the column's own values
    "year(ts)", "month(ts)", "day(ts)", "hour(ts)"
    "bucket[16](id)"           Iceberg's Murmur3 bucket of the value, 16 buckets
    "truncate[4](name)"        the value truncated to width 4

Each field is named as pyiceberg names it (`ts_day`, `id_bucket_16`, `name_trunc_4`; an
identity field: its column). For every field that is not an identity, the rows get a key
column of that name before the dataset layer splits them (`AddKeys`): the transform's value
as Iceberg writes it in a path (`ts_day=2024-03-30`, `id_bucket_16=3`), computed by
pyiceberg's own transforms (`pyarrow_transform`, through pyiceberg-core), so each data file
holds one partition. The key columns are left out of the files; the commit takes a file's
partition from its directory where its bounds cannot say (a bucket), and checks the bounds
agree where they can.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ....errors import ConfigError
from ...protocol.hooks import FileColumns, PartitionKeys
from .types import cast_rows, file_schema, file_type

_FIELD = re.compile(r"^\s*([a-z]+(?:\[\s*\d+\s*\])?)\s*\((.+)\)\s*$")
_TRANSFORMS = ("identity", "year", "month", "day", "hour", "bucket", "truncate")
_NEEDS_CORE = "pip install 'pyiceberg[pyiceberg-core]'"


def parse_spec(items: Any) -> tuple[tuple[str, str], ...]:
    """The `partition_spec` option as (transform, column) pairs; ConfigError naming the item
    that is not one of the forms above."""
    from pyiceberg.transforms import parse_transform

    if isinstance(items, Sequence) and not items:
        return ()
    if isinstance(items, str) or not isinstance(items, Sequence):
        raise ConfigError(
            f"partition_spec must be a list of fields such as ['day(ts)', 'bucket[16](id)'], "
            f"got {items!r}"
        )
    out = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"partition_spec: {item!r} is not a field such as 'day(ts)'")
        found = _FIELD.match(item)
        if found is None:
            out.append(("identity", item.strip()))
            continue
        transform, column = re.sub(r"\s+", "", found.group(1)), found.group(2).strip()
        if transform.split("[")[0] not in _TRANSFORMS or (
            transform.startswith(("bucket", "truncate")) != ("[" in transform)
        ):
            raise ConfigError(
                f"partition_spec: {item!r}: unknown transform {transform!r}; use identity, "
                "year, month, day, hour, bucket[N] or truncate[W], e.g. 'day(ts)', "
                "'bucket[16](id)'"
            )
        width = transform.partition("[")[2].rstrip("]")
        if width and int(width) < 1:
            raise ConfigError(f"partition_spec: {item!r}: {transform!r} needs a width above 0")
        out.append((str(parse_transform(transform)), column))
    if len(set(out)) != len(out):
        raise ConfigError(f"partition_spec {list(items)} names a field twice")
    return tuple(out)


def field_name(transform: str, column: str) -> str:
    """The partition field's name as pyiceberg's `update_spec().add_field` names it."""
    kind, _, rest = transform.partition("[")
    width = rest.rstrip("]")
    names = {"identity": column, "bucket": f"{column}_bucket_{width}"}
    names["truncate"] = f"{column}_trunc_{width}"
    return names.get(kind, f"{column}_{kind}")


def spec_fields(url: str, schema: Any, items: Sequence[tuple[str, str]]) -> list[Any]:
    """The PartitionFields of spec `items` on Iceberg schema `schema` (field ids from 1000,
    as a new table's); ConfigError naming a column the data lacks or a transform its type
    does not take."""
    from pyiceberg.partitioning import PartitionField
    from pyiceberg.transforms import parse_transform

    fields = []
    for i, (transform, column) in enumerate(items):
        try:
            source = schema.find_field(column)
        except ValueError:
            names = [f.name for f in schema.fields]
            raise ConfigError(
                f"partition_spec field {transform}({column}) of Iceberg table {url}: the data "
                f"has no column {column!r}; columns: {', '.join(names)}"
            ) from None
        made = parse_transform(transform)
        if not made.can_transform(source.field_type):
            raise ConfigError(
                f"partition_spec field {transform}({column}) of Iceberg table {url}: column "
                f"{column!r} is {source.field_type}, which {transform} does not take"
            )
        name = field_name(transform, column)
        fields.append(PartitionField(source.field_id, 1000 + i, made, name))
    return fields


def describe_field(field: Any, schema: Any) -> str:
    """`day` for an identity field on `day`, `day(ts)` for a day transform of `ts`."""
    name = schema.find_column_name(field.source_id)
    transform = str(field.transform)
    return name if transform == "identity" else f"{transform}({name})"


def describe(spec: Any, schema: Any) -> list[str]:
    """A spec in the option's form (`["day(ts)", "id"]`)."""
    return [describe_field(f, schema) for f in spec.fields]


def check_same_spec(url: str, schema: Any, spec: Any, items: Sequence[tuple[str, str]]) -> None:
    """Refuse a `partition_spec` that is not the existing table's (dataferry does not evolve
    a table's partitioning)."""
    given = [c if t == "identity" else f"{t}({c})" for t, c in items]
    if describe(spec, schema) != given:
        raise ConfigError(
            f"Iceberg table {url} is partitioned by {describe(spec, schema)}, not by "
            f"partition_spec={given}: give the table's spec (or none); dataferry does not "
            "change the partitioning of a table"
        )


@dataclass(frozen=True)
class KeyColumn:
    """A key column derived from a source column by a spec field's transform."""

    name: str  # the partition field's name
    source: str  # the data's column
    transform: str  # as pyiceberg prints it: "day", "bucket[16]"
    source_type: Any  # the source's Iceberg type
    arrow_type: Any  # the source's Arrow type in the files (what the transform is applied to)

    def values(self, column: pa.ChunkedArray | pa.Array) -> pa.Array:
        """The transform's value of each row, as Iceberg writes it in a path (null: null)."""
        from pyiceberg.transforms import parse_transform

        transform = parse_transform(self.transform)
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        if array.type != self.arrow_type:  # as the files hold it (nanoseconds truncated)
            array = array.cast(self.arrow_type, safe=not pa.types.is_timestamp(array.type))
        result = transform.pyarrow_transform(self.source_type)(array)
        if pa.types.is_string(result.type) or pa.types.is_large_string(result.type):
            return result.cast(pa.string())  # a truncated string is its own human string
        if pa.types.is_integer(result.type) and self.transform.startswith(("bucket", "trunc")):
            return result.cast(pa.string())  # a bucket or truncated integer: its digits
        found = pc.unique(result)  # a time transform: few values, each as Iceberg shows it
        kind = transform.result_type(self.source_type)
        human = [
            None if v is None else transform.to_human_string(kind, v) for v in found.to_pylist()
        ]
        return pc.take(pa.array(human, pa.string()), pc.index_in(result, value_set=found))


@dataclass(frozen=True)
class AddKeys:
    """Rows (a Table or RecordBatch) -> the same rows with the key columns appended; sent to
    tasks (Dask), so a plain picklable record."""

    keys: tuple[KeyColumn, ...]

    def __call__(self, rows: Any) -> Any:
        columns = list(rows.columns)
        names = list(rows.schema.names)
        for key in self.keys:
            columns.append(key.values(rows.column(key.source)))
            names.append(key.name)
        kind = pa.Table if isinstance(rows, pa.Table) else pa.RecordBatch
        schema = pa.schema(
            [*rows.schema, *(pa.field(k.name, pa.string()) for k in self.keys)],
            metadata=rows.schema.metadata,
        )
        return kind.from_arrays(columns, schema=schema)


def key_columns(url: str, data: pa.Schema, schema: Any, spec: Any) -> tuple[KeyColumn, ...]:
    """The key columns that split data of Arrow schema `data` by `spec` (Iceberg schema
    `schema`): one per field that is not an identity, of a top-level column of the data.
    ConfigError when pyiceberg cannot compute them here (pyiceberg-core missing)."""
    from pyiceberg.transforms import IdentityTransform, VoidTransform

    keys = []
    for f in spec.fields:
        if isinstance(f.transform, IdentityTransform | VoidTransform):
            continue
        source = schema.find_field(f.source_id)
        name = schema.find_column_name(f.source_id)
        if name not in data.names:
            continue  # a nested column: each file must lie in one value (checked at commit)
        if f.name in data.names:
            raise ConfigError(
                f"Iceberg table {url}: the data has a column {f.name!r}, the name of the "
                f"table's partition field {f.transform}({name}); rename the column"
            )
        key = KeyColumn(
            f.name, name, str(f.transform), source.field_type, file_type(data.field(name).type)
        )
        try:
            key.values(pa.array([], key.arrow_type))
        except Exception as e:
            raise ConfigError(
                f"Iceberg table {url} is partitioned by {f.transform}({name}): splitting rows "
                f"by it needs pyiceberg's transforms ({_NEEDS_CORE}): {e}"
            ) from None
        keys.append(key)
    return tuple(keys)


def partition_keys(
    data: pa.Schema,
    partition_by: Sequence[str],
    schema: Any,
    spec: Any,
    keys: Sequence[KeyColumn],
) -> PartitionKeys | None:
    """How data of Arrow schema `data` is split by the table's `spec`: its identity columns
    and the key columns, in the spec's order; None for an unpartitioned table."""
    from pyiceberg.transforms import IdentityTransform

    by_name = {k.name: k for k in keys}
    split = []
    for f in spec.fields:
        if f.name in by_name:
            split.append(f.name)
        elif isinstance(f.transform, IdentityTransform):
            column = schema.find_column_name(f.source_id)
            if column in data.names:
                split.append(column)
    if not keys and tuple(split) == tuple(partition_by):
        return None  # identity columns only, those given: the split by raw values
    if not split:
        return None
    added = pa.schema(
        [*data, *(pa.field(k.name, pa.string()) for k in keys)], metadata=data.metadata
    )
    return PartitionKeys(tuple(dict.fromkeys(split)), added, AddKeys(tuple(keys)))


def data_file_columns(
    schema: pa.Schema, keys: Sequence[str], types: dict[str, pa.DataType] | None
) -> FileColumns | None:
    """What a data file of the rows of Arrow schema `schema` holds: the rows without the
    split's key columns `keys`, cast to the table's types (`types`: its columns as files
    hold them; `types.py`); None: the rows as they are."""
    keys = [k for k in keys if k in schema.names]
    data = pa.schema([f for f in schema if f.name not in keys], metadata=schema.metadata)
    target = file_schema(data, types)
    if target.equals(schema):
        return None

    def rows_of_file(rows: pa.Table, _first: int) -> pa.Table:
        return cast_rows(rows.drop_columns(keys) if keys else rows, target)

    return FileColumns(schema=target, prepend=rows_of_file)


def add_spec(tx: Any, items: Sequence[tuple[str, str]]) -> None:
    """Give the table a new transaction `tx` creates the spec `items` (names as pyiceberg's)."""
    from pyiceberg.transforms import parse_transform

    if items:
        with tx.update_spec() as spec:
            for transform, column in items:
                spec.add_field(column, parse_transform(transform), field_name(transform, column))
