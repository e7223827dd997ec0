"""Hudi's metadata table as dataferry keeps it, through the store: made with the table, given
each data instant's files and column statistics in a `deltacommit` of the same instant before
the data instant completes, and its part of an instant taken back when dataferry rolls that
instant back.

Order, so that no reader sees the one without the other: the log files of the instant, then
`<instant>.deltacommit` (the metadata table's switch), then the data table's `<instant>.commit`.
Hudi's reader reads a block only if its instant is completed on both timelines, so a crash
before the data instant completes leaves blocks no reader reads; the rollback deletes them
(first the `deltacommit`, then the log files whose first block is of the instant) before the
data table's `.rollback` is written (which would make Hudi read a rolled-back instant's
blocks). Writing an instant again writes its records again (the same keys: harmless).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from .....store import Store, paths
from ...footers import FileFacts
from ...layout import partition_dir
from ..timeline import PARTITION_METADATA, checksum
from .layout import (
    COLUMN_STATS,
    FILES,
    INIT_INSTANT,
    KEPT,
    PROPERTIES,
    ROOT,
    TIMELINE,
    file_groups,
    first_file_id,
    group_index,
    log_name,
    properties_bytes,
)
from .logformat import HEAD_BYTES, avro_data_block, block_instant
from .records import SCHEMA, all_column_stats, file_list_records

log = logging.getLogger("dataferry.commit")
PARTITIONS_KEY = "hoodie.table.metadata.partitions"


def kept_partitions(props: Mapping[str, str]) -> list[str]:
    """The metadata partitions the table's properties list."""
    return [p for p in props.get(PARTITIONS_KEY, "").split(",") if p.strip()]


def keepable(store: Store, props: Mapping[str, str]) -> bool:
    """Whether dataferry can keep the table's metadata table: none listed, or only partitions
    it writes, with the metadata table's properties in place."""
    listed = kept_partitions(props)
    return not listed or (set(listed) <= set(KEPT) and store.exists(PROPERTIES))


def _deltacommit(instant: str, suffix: str) -> str:
    return f"{TIMELINE}/{instant}.{suffix}"


def create(store: Store, table_name: str, database: str) -> None:
    """The empty metadata table (its properties, partitions and the initializing instant):
    made before the data table's properties name its partitions."""
    props = properties_bytes(table_name, checksum(database, f"{table_name}_metadata"))
    store.create_if_absent(PROPERTIES, props)
    for part in KEPT:
        text = f"#partition metadata\ncommitTime={INIT_INSTANT}\npartitionDepth=1\n"
        store.create_if_absent(f"{ROOT}/{part}/{PARTITION_METADATA}", text.encode())
    _pending(store, INIT_INSTANT)
    _complete(store, INIT_INSTANT, {}, "INSERT")


def _pending(store: Store, instant: str) -> None:
    for suffix in ("deltacommit.requested", "deltacommit.inflight"):
        store.create_if_absent(_deltacommit(instant, suffix), b"")


def _complete(store: Store, instant: str, stats: dict[str, Any], operation: str) -> None:
    meta = {
        "partitionToWriteStats": stats,
        "compacted": False,
        "extraMetadata": {"schema": json.dumps(SCHEMA)},
        "operationType": operation,
    }
    store.create_if_absent(_deltacommit(instant, "deltacommit"), json.dumps(meta).encode())


def completed(store: Store, instant: str) -> bool:
    return store.exists(_deltacommit(instant, "deltacommit"))


def _completed_instants(store: Store) -> set[str]:
    """The metadata table's completed instants (its deltacommits and compactions)."""
    found = [e.name.split(".") for e in store.list_or_empty(TIMELINE)]
    return {n[0] for n in found if len(n) == 2 and n[1] in ("deltacommit", "commit")}


def _append(
    store: Store, part: str, instant: str, records: list[dict[str, Any]], done: set[str]
) -> list[dict]:
    """The records as one Avro block per file group (Hudi's routing by key), each in a new
    log file on the group's latest slice; the write stats of each."""
    names = [e.name for e in store.list_or_empty(f"{ROOT}/{part}")]
    groups = file_groups(names, done) or {first_file_id(part): (INIT_INSTANT, 0)}
    fids = sorted(groups)
    routed: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        routed.setdefault(fids[group_index(r["key"], len(fids))], []).append(r)
    stats = []
    for fid, mine in sorted(routed.items()):
        base, version = groups[fid]
        data = avro_data_block(instant, SCHEMA, mine)
        version += 1
        while not store.create_if_absent(f"{ROOT}/{part}/{log_name(fid, base, version)}", data):
            version += 1  # another writer took it
        name = log_name(fid, base, version)
        stats.append(
            {
                "fileId": fid,
                "path": f"{part}/{name}",
                "prevCommit": base,
                "numWrites": len(mine),
                "numDeletes": 0,
                "numUpdateWrites": 0,
                "numInserts": len(mine),
                "totalWriteBytes": len(data),
                "totalWriteErrors": 0,
                "partitionPath": part,
                "fileSizeInBytes": len(data),
                "logVersion": version,
                "logOffset": 0,
                "baseFile": "",
                "logFiles": [name],
            }
        )
    return stats


def write_instant(
    store: Store,
    instant: str,
    partitions: Sequence[str],
    facts: Sequence[FileFacts],
    schema: pa.Schema | None,
) -> None:
    """The instant's files (and their column statistics) as the metadata table's
    `<instant>.deltacommit`, completed; nothing if it is already."""
    if completed(store, instant):
        return
    _pending(store, instant)
    by_part: dict[str, dict[str, int]] = {}
    located = []
    for f in facts:
        part = partition_dir(f.path)
        by_part.setdefault(part, {})[paths.name(f.path)] = f.size
        located.append((part, f))
    stats: dict[str, Any] = {}
    done = _completed_instants(store)
    if FILES in partitions and by_part:
        stats[FILES] = _append(store, FILES, instant, file_list_records(by_part), done)
    if COLUMN_STATS in partitions and schema is not None:
        records = all_column_stats(located, schema)
        if records:
            stats[COLUMN_STATS] = _append(store, COLUMN_STATS, instant, records, done)
    _complete(store, instant, stats, "UPSERT_PREPPED")
    log.info("Hudi metadata table: deltacommit %s with %d files", instant, len(facts))


def roll_back_instant(store: Store, instant: str) -> int:
    """Take the instant's part out of the metadata table: its `deltacommit`, then its log
    files, then its pending files. The number of log files deleted."""
    if not store.exists(PROPERTIES):
        return 0
    store.delete(_deltacommit(instant, "deltacommit"))
    deleted = 0
    for part in KEPT:
        for e in store.list_or_empty(f"{ROOT}/{part}"):
            if e.is_dir or ".log." not in e.name:
                continue
            if block_instant(store.read_range(e.path, 0, HEAD_BYTES)) == instant:
                store.delete(e.path)
                deleted += 1
    for suffix in ("deltacommit.inflight", "deltacommit.requested"):
        store.delete(_deltacommit(instant, suffix))
    if deleted:
        log.warning("Hudi metadata table: rolled back %s (%d log files)", instant, deleted)
    return deleted
