"""What a Hudi copy-on-write table of version 6 (timeline layout 1) is made of, as text and
bytes: instant times, `hoodie.properties`, base file names, the Avro schema and the JSON
commit metadata. No I/O here: the committer (`hudi.py`) writes all of it through its store.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from ....errors import ConfigError
from ..footers import FileFacts
from ..layout import partition_dir
from .avro_meta import ROLLBACK_SCHEMA, avro_file
from .plan import SliceFacts

HOODIE = ".hoodie"
TEMP = f"{HOODIE}/.temp"
PROPERTIES = f"{HOODIE}/hoodie.properties"
PARTITION_METADATA = ".hoodie_partition_metadata"  # in every partition: what Java Hudi lists
JOB_RECORD = "dataferry-job.json"  # in `.hoodie/.temp/<instant>/`: which job the instant is
JOB_UUID_KEY = "dataferry.job-uuid"
COMPLETED_ACTIONS = ("commit", "replacecommit")
MODE_OPERATIONS = {
    "overwrite-partitions": ("replacecommit", "INSERT_OVERWRITE"),
    "overwrite": ("replacecommit", "INSERT_OVERWRITE_TABLE"),
}
# `hoodie.datasource.write.operation` -> the `operationType` of the commit (append, error)
OPERATIONS = {"upsert": "UPSERT", "insert": "INSERT", "bulk_insert": "BULK_INSERT"}
_INSTANT_RE = re.compile(r"^(\d{14}|\d{17})\.")
_FORMAT = "%Y%m%d%H%M%S"


# --- instants ---------------------------------------------------------------------------------


def format_instant(when: dt.datetime) -> str:
    """`yyyyMMddHHmmssSSS` in UTC."""
    when = when.astimezone(dt.UTC)
    return when.strftime(_FORMAT) + f"{when.microsecond // 1000:03d}"


def parse_instant(text: str) -> dt.datetime:
    """An instant time (17 or 14 digits) as a UTC datetime."""
    base = dt.datetime.strptime(text[:14], _FORMAT).replace(tzinfo=dt.UTC)
    return base + dt.timedelta(milliseconds=int(text[14:17] or 0))


def instant_of_name(name: str) -> str | None:
    """The instant a timeline file name starts with (None for other files)."""
    m = _INSTANT_RE.match(name)
    return m.group(1) if m else None


def utc_now() -> dt.datetime:
    """The clock instants are taken from (one place, so tests can stop it)."""
    return dt.datetime.now(dt.UTC)


def next_instant(existing: Iterable[str], now: dt.datetime | None = None) -> str:
    """The current UTC time as an instant, made strictly later than every instant given
    (compared at the instant's millisecond: a time later within the latest one's millisecond
    is that instant again)."""
    when = now or utc_now()
    when = when.replace(microsecond=when.microsecond // 1000 * 1000)
    latest = max((parse_instant(i) for i in existing), default=None)
    if latest is not None and when <= latest:
        when = latest + dt.timedelta(milliseconds=1)
    return format_instant(when)


def timeline_file(instant: str, suffix: str) -> str:
    """`.hoodie/<instant>.<suffix>` (`commit`, `commit.requested`, `inflight`, ...)."""
    return f"{HOODIE}/{instant}.{suffix}"


def pending_suffixes(action: str) -> tuple[str, str]:
    """The requested and inflight files' suffixes of an action (layout 1)."""
    if action == "commit":
        return "commit.requested", "inflight"
    return f"{action}.requested", f"{action}.inflight"


def instant_files(instant: str) -> list[str]:
    """Every timeline file an instant of ours may have (completed first, of both actions)."""
    found = [timeline_file(instant, a) for a in COMPLETED_ACTIONS]
    for action in COMPLETED_ACTIONS:
        found += [timeline_file(instant, s) for s in reversed(pending_suffixes(action))]
    return found


def operation_of_mode(mode: str, operation: str = "insert") -> tuple[str, str]:
    """(action, operationType) of a write mode and write operation, as Hudi's Spark writer
    makes them: an overwrite is an insert overwrite whatever the operation."""
    if mode in ("append", "error") and operation in OPERATIONS:
        return "commit", OPERATIONS[operation]
    if mode not in MODE_OPERATIONS:
        raise ConfigError(f"the Hudi committer does not support mode={mode!r}")
    return MODE_OPERATIONS[mode]


def live_file_groups(metas: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """partition -> {fileId: its latest base file} after the given completed instants'
    metadata (oldest first): the file groups written, less those a replacecommit replaced."""
    live: dict[str, dict[str, str]] = {}
    for meta in metas:
        for part, ids in (meta.get("partitionToReplaceFileIds") or {}).items():
            for fid in ids:
                live.get(part, {}).pop(fid, None)
        for part, stats in (meta.get("partitionToWriteStats") or {}).items():
            for s in stats:
                live.setdefault(part, {})[s.get("fileId", "")] = s["path"]
    return live


def replaced_file_ids(
    live: Mapping[str, Mapping[str, str]], partitions: Sequence[str] | None
) -> dict[str, list[str]]:
    """`partitionToReplaceFileIds` of an insert overwrite: every live file group of the
    partitions written (each written partition named, as Java Hudi does), or of the whole
    table (`partitions` None)."""
    parts = sorted(live) if partitions is None else sorted(set(partitions))
    return {p: sorted(live.get(p, {})) for p in parts}


# --- file names -------------------------------------------------------------------------------


def write_token(task_index: int, job_attempt: int, attempt_number: int) -> str:
    """`<task>-<job attempt>-<task attempt>` (`FSUtils.makeWriteToken`'s shape)."""
    return f"{task_index}-{job_attempt}-{attempt_number}"


def file_id(job_uuid: str, token: str, relpath: str) -> str:
    """A file group id unique to the job, attempt and file (a UUID plus `-0`, no `_`);
    the same for the same file of the same attempt, so a marker and its file agree."""
    return f"{uuid.uuid5(uuid.NAMESPACE_URL, f'{job_uuid}/{token}/{relpath}')}-0"


def base_file_name(fid: str, token: str, instant: str, ext: str = "parquet") -> str:
    """`<fileId>_<writeToken>_<instant>.parquet` (`FSUtils.makeBaseFileName`)."""
    return f"{fid}_{token}_{instant}.{ext}"


def parse_base_file_name(name: str) -> tuple[str, str, str] | None:
    """(fileId, writeToken, instant) of a base file name; None if it is not one."""
    stem = name.rsplit(".", 1)[0]
    parts = stem.split("_")
    if len(parts) != 3 or not _INSTANT_RE.match(parts[2] + "."):
        return None
    return parts[0], parts[1], parts[2]


# --- hoodie.properties ------------------------------------------------------------------------


def checksum(database: str, table: str) -> int:
    """`HoodieTableConfig.generateChecksum`: CRC32 of `<database>.<table>`."""
    return zlib.crc32(f"{database}.{table}".encode())


def key_generator(record_key: Sequence[str], partition_fields: Sequence[str]) -> str:
    if not partition_fields:
        return "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
    if len(record_key) <= 1 and len(partition_fields) == 1:
        return "org.apache.hudi.keygen.SimpleKeyGenerator"
    return "org.apache.hudi.keygen.ComplexKeyGenerator"


def _escape(value: str) -> str:
    """A java.util.Properties value, escaped as Java writes it."""
    out = value.replace("\\", "\\\\").replace("\n", "\\n")
    for c in (":", "=", "#", "!"):
        out = out.replace(c, "\\" + c)
    return out


def properties_bytes(
    table_name: str,
    database: str,
    record_key: Sequence[str],
    partition_fields: Sequence[str],
    precombine: str,
    create_schema: str,
    metadata_partitions: Sequence[str] = (),
) -> bytes:
    """The table's `hoodie.properties` (version 6, timeline layout 1, copy-on-write)."""
    props: dict[str, str] = {
        "hoodie.table.name": table_name,
        "hoodie.table.type": "COPY_ON_WRITE",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.base.file.format": "PARQUET",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.partition.fields": ",".join(partition_fields),
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.partitionpath.urlencode": "false",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.keygenerator.class": key_generator(record_key, partition_fields),
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.archivelog.folder": "archived",
        "hoodie.table.metadata.partitions": ",".join(sorted(metadata_partitions)),
        "hoodie.table.metadata.partitions.inflight": "",
    }
    if database:
        props["hoodie.database.name"] = database
    if record_key:
        props["hoodie.table.recordkey.fields"] = ",".join(record_key)
    if precombine:
        props["hoodie.table.precombine.field"] = precombine
    if create_schema:
        props["hoodie.table.create.schema"] = create_schema
    props["hoodie.table.checksum"] = str(checksum(database, table_name))
    lines = ["#Properties saved by dataferry", *(f"{k}={_escape(v)}" for k, v in props.items())]
    return ("\n".join(lines) + "\n").encode("utf-8")


def partition_metadata(partition: str, instant: str) -> tuple[str, bytes]:
    """The `.hoodie_partition_metadata` of `partition` ("" : the table's root, a table without
    partitions) and its text, as Java Hudi's `HoodiePartitionMetadata` saves it (a properties
    file: the instant that made the partition and its depth). Java Hudi finds a table's
    partitions by this file (without the metadata table): a partition without it is never
    read."""
    partition = partition.strip("/")
    depth = len(partition.split("/")) if partition else 0
    when = parse_instant(instant).strftime("%a %b %d %H:%M:%S UTC %Y")
    text = f"#partition metadata\n#{when}\ncommitTime={instant}\npartitionDepth={depth}\n"
    path = f"{partition}/{PARTITION_METADATA}" if partition else PARTITION_METADATA
    return path, text.encode("utf-8")


def parse_properties(data: bytes) -> dict[str, str]:
    """`hoodie.properties` as a dict (the subset of java.util.Properties Hudi writes)."""
    props: dict[str, str] = {}
    for raw in data.decode("utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.search(r"(?<!\\)[=:]", line)
        key, value = (line[: m.start()], line[m.end() :]) if m else (line, "")
        props[key.strip()] = re.sub(r"\\(.)", lambda g: {"n": "\n"}.get(g[1], g[1]), value)
    return props


# what hudi-rs needs to open a table (`hoodie.table.checksum`: Java Hudi's check of the file)
REQUIRED_PROPERTIES = (
    "hoodie.table.name",
    "hoodie.table.type",
    "hoodie.table.version",
    "hoodie.timeline.layout.version",
    "hoodie.table.checksum",
)
_PROPERTY_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")


def check_properties(data: bytes) -> dict[str, str]:
    """`hoodie.properties` as a dict, or ValueError saying why it is damaged: not text, empty,
    a line that is no `key=value`, a required key missing (a file cut short: Java Hudi and
    dataferry both write the checksum), or a checksum that does not match the table's name."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("it is not text") from None
    if not text.strip():
        raise ValueError("it is empty")
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.search(r"(?<!\\)[=:]", line)
        if m is None or not _PROPERTY_KEY.match(line[: m.start()].strip()):
            raise ValueError(f"line {n} is not a key=value property: {raw[:60]!r}")
    props = parse_properties(data)
    missing = [k for k in REQUIRED_PROPERTIES if not props.get(k)]
    if missing:
        raise ValueError(f"it has no {missing[0]} (cut short?)")
    want = checksum(props.get("hoodie.database.name", ""), props["hoodie.table.name"])
    if props["hoodie.table.checksum"] != str(want):
        raise ValueError(
            f"hoodie.table.checksum is {props['hoodie.table.checksum']!r}, not {want} "
            "(the CRC32 of its database and table names)"
        )
    return props


def fields_of(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Hudi's comma-separated field list (or a list) as a tuple."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(s.strip() for s in items if s and s.strip())


# --- the Avro schema --------------------------------------------------------------------------


def avro_schema(schema: pa.Schema, table_name: str) -> dict[str, Any]:
    """The table's schema as Hudi records it (an Avro record, nullable fields as unions)."""
    name = re.sub(r"\W", "_", table_name) or "table"
    return {
        "type": "record",
        "name": f"{name}_record",
        "namespace": f"hoodie.{name}",
        "fields": [_avro_field(f, f"hoodie.{name}.{name}_record") for f in schema],
    }


def _avro_field(f: pa.Field, space: str) -> dict[str, Any]:
    t = _avro_type(f.type, f"{space}.{f.name}", f.name)
    if f.nullable:
        return {"name": f.name, "type": ["null", t], "default": None}
    return {"name": f.name, "type": t}


def _avro_type(t: pa.DataType, space: str, name: str) -> Any:
    simple = [
        (pa.types.is_boolean, "boolean"),
        (lambda x: pa.types.is_integer(x) and x.bit_width <= 32 and not _is_u32(x), "int"),
        (pa.types.is_integer, "long"),
        (pa.types.is_float16, "float"),
        (pa.types.is_float32, "float"),
        (pa.types.is_float64, "double"),
        (lambda x: pa.types.is_string(x) or pa.types.is_large_string(x), "string"),
        (lambda x: pa.types.is_string_view(x), "string"),
        (lambda x: pa.types.is_binary(x) or pa.types.is_large_binary(x), "bytes"),
    ]
    for test, avro in simple:
        if test(t):
            return avro
    if pa.types.is_dictionary(t):
        return _avro_type(t.value_type, space, name)
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        logical = "timestamp-millis" if t.unit in ("s", "ms") else "timestamp-micros"
        if t.tz is None:
            logical = logical.replace("timestamp", "local-timestamp")
        return {"type": "long", "logicalType": logical}
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision,
                "scale": t.scale}  # fmt: skip
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = _avro_type(t.value_type, space, f"{name}_item")
        return {"type": "array", "items": ["null", item] if t.value_field.nullable else item}
    if pa.types.is_map(t):
        item = _avro_type(t.item_type, space, f"{name}_value")
        return {"type": "map", "values": ["null", item] if t.item_field.nullable else item}
    if pa.types.is_struct(t):
        rec = re.sub(r"\W", "_", name)
        return {
            "type": "record",
            "name": rec,
            "namespace": space.rsplit(".", 1)[0],
            "fields": [_avro_field(t.field(i), f"{space}.{rec}") for i in range(t.num_fields)],
        }
    raise ConfigError(f"column {name!r} of type {t} has no Avro type a Hudi table can record")


def _is_u32(t: pa.DataType) -> bool:
    return pa.types.is_uint32(t)


# --- commit metadata --------------------------------------------------------------------------


def write_stat(facts: FileFacts, instant: str) -> dict[str, Any]:
    """The `HoodieWriteStat` of one new base file (an insert: no previous commit)."""
    name = facts.path.rsplit("/", 1)[-1]
    parsed = parse_base_file_name(name)
    return {
        "fileId": parsed[0] if parsed else name,
        "path": facts.path,
        "prevCommit": "null",
        "numWrites": facts.rows,
        "numDeletes": 0,
        "numUpdateWrites": 0,
        "numInserts": facts.rows,
        "totalWriteBytes": facts.size,
        "totalWriteErrors": 0,
        "tempPath": None,
        "partitionPath": partition_dir(facts.path),
        "totalLogRecords": 0,
        "totalLogFilesCompacted": 0,
        "totalLogSizeCompacted": 0,
        "totalUpdatedRecordsCompacted": 0,
        "totalLogBlocks": 0,
        "totalCorruptLogBlock": 0,
        "totalRollbackBlocks": 0,
        "fileSizeInBytes": facts.size,
        "minEventTime": None,
        "maxEventTime": None,
        "runtimeStats": None,
    }


def update_stat(stat: dict[str, Any], prev_path: str, updates: int) -> dict[str, Any]:
    """The stat of a new file slice of an existing file group (a copy-on-write upsert):
    the group's previous slice as `prevCommit`/`prevBaseFile`, its rows as writes, the new
    versions among them as updates (inserts go to new file groups)."""
    prev = parse_base_file_name(prev_path.rsplit("/", 1)[-1])
    return {
        **stat,
        "prevCommit": prev[2] if prev else "null",
        "prevBaseFile": prev_path.rsplit("/", 1)[-1],
        "numUpdateWrites": updates,
        "numInserts": 0,
    }


def commit_metadata(
    facts: Sequence[FileFacts],
    instant: str,
    operation: str,
    extra: Mapping[str, str],
    replaced: Mapping[str, Sequence[str]] | None = None,
    slices: Mapping[str, SliceFacts] | None = None,
) -> bytes:
    """The completed instant's JSON `HoodieCommitMetadata` (or `HoodieReplaceCommitMetadata`
    when `replaced` is given); `slices`: per base file that is a new slice of an existing
    file group (an upsert's), `prev_path` and `updates` (`update_stat`)."""
    stats: dict[str, list[dict[str, Any]]] = {}
    for f in facts:
        stat = write_stat(f, instant)
        if slices and f.path in slices:
            stat = update_stat(stat, slices[f.path].prev_path, slices[f.path].updates)
        stats.setdefault(stat["partitionPath"], []).append(stat)
    body: dict[str, Any] = {
        "partitionToWriteStats": stats,
        "compacted": False,
        "extraMetadata": dict(extra),
        "operationType": operation,
    }
    if replaced is not None:
        body["partitionToReplaceFileIds"] = {k: list(v) for k, v in replaced.items()}
    return json.dumps(body, indent=2).encode("utf-8")


def rollback_metadata(
    rollback_instant: str, failed: str, deleted: Sequence[str], took_ms: int, action: str
) -> bytes:
    """A `HoodieRollbackMetadata` as Hudi 0.x writes it: an Avro file (`avro_meta.py`)."""
    parts: dict[str, dict[str, Any]] = {}
    for path in deleted:
        p = partition_dir(path)
        entry = parts.setdefault(
            p,
            {
                "partitionPath": p,
                "successDeleteFiles": [],
                "failedDeleteFiles": [],
                "rollbackLogFiles": None,
                "logFilesFromFailedCommit": None,
            },
        )
        entry["successDeleteFiles"].append(path)
    body = {
        "startRollbackTime": rollback_instant,
        "timeTakenInMillis": took_ms,
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [failed],
        "partitionMetadata": parts,
        "version": 1,
        "instantsRollback": [{"commitTime": failed, "action": action}],
    }
    return avro_file(ROLLBACK_SCHEMA, body)
