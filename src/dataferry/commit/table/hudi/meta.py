"""Hudi's meta columns: the five string columns every base file of a table with
`hoodie.populate.meta.fields` true (Hudi's default, so every table Spark or Java Hudi writes)
holds before its data columns, filled as Hudi's writers fill them:

    _hoodie_commit_time     the instant
    _hoodie_commit_seqno    `<instant>_<task index>_<row number in the file>`
    _hoodie_record_key      the record key field's value (SimpleKeyGenerator), or
                            `f1:v1,f2:v2` (ComplexKeyGenerator, or several fields)
    _hoodie_partition_path  the partition directory (`day=2024-01-01`; "" unpartitioned)
    _hoodie_file_name       the base file's name

hudi-rs refuses a base file without them in such a table. Tables dataferry creates set the
property false (their files hold the data columns only); these are for tables Hudi made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ....errors import ConfigError
from ....store import paths
from ...protocol.hooks import FileColumns
from ..layout import partition_dir
from .keys import record_keys
from .timeline import fields_of

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
KEY_FORMS = ("", "simple", "complex")


def populates_meta_fields(props: Mapping[str, str]) -> bool:
    """Whether the table's files hold the meta columns (absent means true, as in Hudi); a
    table with no `hoodie.properties` yet is dataferry's to create, without them."""
    return bool(props) and props.get("hoodie.populate.meta.fields", "true").lower() != "false"


def record_key_fields(props: Mapping[str, str], given: Sequence[str]) -> tuple[str, ...]:
    return tuple(given) or fields_of(props.get("hoodie.table.recordkey.fields", ""))


def key_form(props: Mapping[str, str], keys: Sequence[str]) -> str:
    """ "simple" (the value) or "complex" (`field:value,...`), by the table's key generator."""
    generator = props.get("hoodie.table.keygenerator.class", "") or props.get(
        "hoodie.table.keygenerator.type", ""
    )
    return "complex" if "complex" in generator.lower() or len(keys) > 1 else "simple"


def meta_options(props: Mapping[str, str], record_key: Sequence[str]) -> dict[str, Any]:
    """The job config's meta-column options for the table (none when it has no meta
    columns): its record key fields and their form."""
    if not populates_meta_fields(props):
        return {"meta_fields": ""}
    keys = record_key_fields(props, record_key)
    return {"meta_fields": key_form(props, keys), "record_key": keys}


def check_meta_input(
    props: Mapping[str, str], record_key: Sequence[str], schema: pa.Schema, url: str
) -> None:
    """Refuse (ConfigError) data the meta columns of a table that has them cannot be made
    from: no record key field, one the data lacks, or a layout dataferry does not write."""
    if not populates_meta_fields(props):
        return
    table_keys = fields_of(props.get("hoodie.table.recordkey.fields", ""))
    keys = record_key_fields(props, record_key)
    where = f"Hudi table {url} has hoodie.populate.meta.fields=true"
    if not keys:
        raise ConfigError(
            f"{where} but no hoodie.table.recordkey.fields: give record_key=<field> (the "
            "_hoodie_record_key column is made from it)"
        )
    if table_keys and tuple(record_key) and tuple(record_key) != table_keys:
        raise ConfigError(
            f"{where} and record key {list(table_keys)}; the write gives "
            f"record_key={list(record_key)}: give the table's"
        )
    for key in keys:
        if key not in schema.names:
            raise ConfigError(f"{where}; its record key field {key!r} is not a column of the data")
    for name in META_COLUMNS:
        if name in schema.names:
            raise ConfigError(f"{where}; the data must not hold its meta column {name!r}")
    partitioned = fields_of(props.get("hoodie.table.partition.fields", ""))
    hive = props.get("hoodie.datasource.write.hive_style_partitioning", "false").lower()
    if partitioned and hive != "true":
        raise ConfigError(
            f"Hudi table {url} is not hive-style partitioned: dataferry writes `col=value` "
            "partition directories only"
        )


def data_schema(schema: pa.Schema | None) -> pa.Schema | None:
    """The schema without the meta columns (what Hudi records as the table's schema)."""
    if schema is None or not any(n in schema.names for n in META_COLUMNS):
        return schema
    return pa.schema([f for f in schema if f.name not in META_COLUMNS], schema.metadata)


def meta_file_columns(
    config: Any, task_index: int, base_file: str, schema: pa.Schema
) -> FileColumns:
    """The meta columns of the base file `base_file` (table-relative), written by task
    `task_index` at the job's instant, as the `file_columns` hook gives them."""
    instant = config.instant
    keys = tuple(config.record_key)
    complex_keys = config.meta_fields == "complex"
    name, partition = paths.name(base_file), partition_dir(base_file)
    missing = [k for k in keys if k not in schema.names] or ([] if keys else ["(none)"])
    if missing:
        raise ConfigError(f"record key field {missing[0]!r} is not a column of {base_file}")
    file_schema = pa.schema(
        [pa.field(c, pa.string()) for c in META_COLUMNS] + list(schema), schema.metadata
    )
    prefix = f"{instant}_{task_index}_"

    def prepend(rows: pa.Table, first_row: int) -> pa.Table:
        n = rows.num_rows
        seq = pc.cast(pa.array(np.arange(first_row, first_row + n, dtype=np.int64)), pa.string())
        meta = [
            pa.repeat(pa.scalar(instant, pa.string()), n),
            pc.binary_join_element_wise(prefix, seq, ""),
            record_keys(rows, keys, complex_keys, name),
            pa.repeat(pa.scalar(partition, pa.string()), n),
            pa.repeat(pa.scalar(name, pa.string()), n),
        ]
        return pa.Table.from_arrays(meta + list(rows.columns), schema=file_schema)

    return FileColumns(schema=file_schema, prepend=prepend)
