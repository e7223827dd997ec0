"""Where Hudi's metadata table keeps things (table version 6): a MERGE_ON_READ table under
`.hoodie/metadata` with its own timeline (`.hoodie/metadata/.hoodie`, a `deltacommit` per data
instant, of the same time), partitions `files` and `column_stats`, each of file groups
(`files-0000-0`, `col-stats-0000-0`, ...) whose slices are an HFile base file and log files
`.<fileId>_<base instant>.log.<version>_<write token>`. No I/O here."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..timeline import HOODIE

ROOT = f"{HOODIE}/metadata"
TIMELINE = f"{ROOT}/.hoodie"
PROPERTIES = f"{TIMELINE}/hoodie.properties"
FILES, COLUMN_STATS = "files", "column_stats"
KEPT = (FILES, COLUMN_STATS)  # the partitions dataferry can keep
PREFIX = {FILES: "files", COLUMN_STATS: "col-stats"}
INIT_INSTANT = "00000000000000010"  # the instant Hudi initializes a metadata table at
TOKEN = "0-0-0"
_LOG = re.compile(r"^\.(.+)_(\d+)\.log\.(\d+)_(\d+-\d+-\d+)$")
_BASE = re.compile(r"^([^.].*?)_(\d+-\d+-\d+)_(\d+)\.hfile$")


def first_file_id(partition: str) -> str:
    return f"{PREFIX[partition]}-0000-0"


def log_name(fid: str, base: str, version: int, token: str = TOKEN) -> str:
    return f".{fid}_{base}.log.{version}_{token}"


def parse_log(name: str) -> tuple[str, str, int] | None:
    """(file id, base instant, version) of a log file's name."""
    m = _LOG.match(name)
    return (m[1], m[2], int(m[3])) if m else None


def parse_base(name: str) -> tuple[str, str] | None:
    """(file id, instant) of an HFile base file's name."""
    m = _BASE.match(name)
    return (m[1], m[3]) if m else None


def file_groups(names: Iterable[str], completed: set[str]) -> dict[str, tuple[str, int]]:
    """Per file group of a partition's listing: the base instant of its latest slice (the
    latest of its log files' bases and of its base files written by a completed instant,
    Hudi's initialization or a compaction) and the highest log version on that base (0:
    none yet)."""
    bases: dict[str, set[str]] = {}
    logs: list[tuple[str, str, int]] = []
    for name in names:
        log = parse_log(name)
        if log is not None:
            logs.append(log)
            bases.setdefault(log[0], set()).add(log[1])
        base = parse_base(name)
        if base is not None and base[1] in completed:
            bases.setdefault(base[0], set()).add(base[1])
    out = {}
    for fid, found in bases.items():
        latest = max(found)
        top = max((v for f, b, v in logs if f == fid and b == latest), default=0)
        out[fid] = (latest, top)
    return out


def group_index(key: str, count: int) -> int:
    """The file group a record key goes to among `count` (HoodieTableMetadataUtil's
    mapRecordKeyToFileGroupIndex: Java's string hash, absolute, modulo)."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    a = h if h == -(1 << 31) else abs(h)  # Java's Math.abs leaves Integer.MIN_VALUE negative
    return abs(a) % count  # Java's remainder takes the dividend's sign; abs drops it again


def properties_bytes(table_name: str, checksum: int) -> bytes:
    """The metadata table's `hoodie.properties`."""
    props = {
        "hoodie.table.name": f"{table_name}_metadata",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.keygenerator.class": "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.compaction.record.merger.strategy": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
        "hoodie.archivelog.folder": "archived",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.checksum": str(checksum),
    }
    lines = ["#Properties saved by dataferry", *(f"{k}={v}" for k, v in props.items())]
    return ("\n".join(lines) + "\n").encode("utf-8")
