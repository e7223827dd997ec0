"""The actions of a Delta job's one version besides its adds, built on the table as
deltalake reads it: a new table's `protocol` and `metaData`; the `metaData` (and `protocol`
upgrade) of a write whose `schema_mode` changes the schema; the removes of an overwrite, an
overwrite of partitions or a replace where, and the predicate the commit logs for them; and
whether the table as it is at commit time still takes the job's files (`still_fits`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ....errors import ConfigError, TableCommitConflict
from ..schemas import check_same_schema
from .actions import (
    delta_schema,
    metadata_action,
    partition_types,
    remove_actions,
    remove_all,
    removes_matching,
    written_predicate,
)
from .predicate import normalized, parse
from .protocol import Protocol, new_protocol, upgraded
from .types import log_type


def created(
    config: Any, schema: pa.Schema, partition_by: list[str], now: int
) -> tuple[list[dict[str, Any]], list[str], dict[str, str]]:
    """A new table's protocol and metaData (with the job's options)."""
    configuration = dict(config.configuration)
    meta = metadata_action(
        delta_schema(schema),
        partition_by,
        name=config.name,
        description=config.description,
        configuration=configuration,
        now_ms=now,
    )
    protocol = new_protocol(meta["metaData"]["schemaString"], configuration)
    return [{"protocol": protocol.to_json()}, meta], partition_by, configuration


def changed(
    config: Any, dt: Any, mode: str, schema: pa.Schema | None, partition_by: list[str], now: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """The metaData (and protocol) actions of a write that changes an existing table's
    schema: `schema_mode="merge"` adds the data's new columns, nullable;
    `schema_mode="overwrite"` (with mode overwrite) replaces the schema and the
    partitioning. None: the table's partitioning, no action."""
    kept = dt.metadata()
    parts = list(kept.partition_columns)
    current = dt.schema().to_json()
    if schema is None or config.schema_mode is None:
        return [], parts
    if config.schema_mode == "overwrite" and mode == "overwrite":
        new, parts = delta_schema(schema), list(partition_by)
    else:
        fields = json.loads(current)["fields"]
        have = {f["name"] for f in fields}
        added = [f.with_nullable(True) for f in schema if f.name not in have]
        if not added:
            return [], parts
        fields += json.loads(delta_schema(pa.schema(added)))["fields"]
        new = json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))
    if json.loads(new) == json.loads(current) and parts == list(kept.partition_columns):
        return [], parts
    meta = metadata_action(
        new,
        parts,
        kept=kept,
        name=config.name,
        description=config.description,
        configuration=config.configuration or None,
        now_ms=now,
    )
    protocol = upgraded(Protocol.of(dt), new)
    return ([{"protocol": protocol.to_json()}] if protocol else []) + [meta], parts


def removed(
    config: Any, dt: Any, mode: str, partitions: Sequence[str], now: int
) -> tuple[list[dict[str, Any]], str]:
    """The remove actions of an overwrite (every live file), an overwrite of partitions
    (the written partitions' files) or a replace where (the files of the partitions the
    predicate selects), and the predicate the commit logs."""
    if mode == "overwrite-partitions":
        columns = list(dt.metadata().partition_columns)
        table_types = partition_types(pa.schema(dt.schema().to_arrow()), columns)
        written = partitions
        predicate = written_predicate(written, columns, table_types) if columns else ""
        return remove_actions(dt, written, now), predicate
    if mode != "overwrite":
        return [], ""
    if not config.predicate:
        return remove_all(dt, now), ""
    columns = list(dt.metadata().partition_columns)
    table_types = partition_types(pa.schema(dt.schema().to_arrow()), columns)
    terms = normalized(parse(config.predicate), table_types)
    return removes_matching(dt, terms, table_types, now), config.predicate


def still_fits(
    fmt: Any, job: Any, dt: Any, mode: str, schema: pa.Schema | None, parts: list[str]
) -> None:
    """The table as it is now takes the job's files (it may have been created or changed
    by another writer since the job checked it): else a conflict, nothing committed."""
    where = f"Delta table {fmt.store.full_url()}"
    if mode == "error":
        raise TableCommitConflict(
            f"job {job.job_id}: {where} was created by another writer while the job "
            "ran (mode='error'); nothing was committed"
        )
    fmt.check_writable(dt, mode)
    if fmt.config.schema_mode == "overwrite" or schema is None:
        return
    table_parts = list(dt.metadata().partition_columns)
    problem = ""
    if table_parts != parts:
        problem = f"it is partitioned by {table_parts}, the job's files by {parts}"
    elif fmt.config.schema_mode is None:
        try:
            check_same_schema(where, pa.schema(dt.schema().to_arrow()), schema, log_type, "")
        except ConfigError as e:
            problem = str(e)
    if problem:
        raise TableCommitConflict(
            f"job {job.job_id}: {where} changed while the job ran: {problem}; nothing was committed"
        )
