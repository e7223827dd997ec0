"""Hudi's log format (version 1), as the metadata table's log files hold it: a log file is a
sequence of blocks, each

    magic `#HUDI#` | int64 size of what follows (to the block's end) | int32 format version
    | int32 block type | header | int64 content length | content | footer
    | int64 the block's length up to this field

where header and footer are maps (int32 count, then per entry int32 key, int32 length, UTF-8
value), the header holding the instant (key 0) and the writer's schema (key 2). The Avro data
block's content (block type 3, HoodieAvroDataBlock): int32 block version (3), int32 record
count, then per record int32 length and its Avro binary encoding (no container).

Hudi's reader takes any data block type in a metadata-table file slice, and a file slice of
log files only (its own `column_stats` file groups start so); dataferry writes Avro blocks, not
the HFile blocks Hudi's writer uses, which would need an HFile writer.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from ..avro_meta import fastavro

BLOCK_MAGIC = b"#HUDI#"
FORMAT_VERSION = 1
AVRO_DATA_BLOCK = 3
AVRO_BLOCK_VERSION = 3
INSTANT_TIME = 0  # header keys (HoodieLogBlock.HeaderMetadataType ordinals)
SCHEMA = 2


def _map(entries: Mapping[int, str]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out.append(struct.pack(">ii", key, len(raw)) + raw)
    return b"".join(out)


def avro_data_block(instant: str, schema: Mapping[str, Any], records: Iterable[dict]) -> bytes:
    """One Avro data block of `records` written by `instant` (the instant first in the header,
    where `block_instant` finds it)."""
    fa = fastavro()
    parsed = fa.parse_schema(dict(schema))
    body, count = io.BytesIO(), 0
    for record in records:
        one = io.BytesIO()
        fa.schemaless_writer(one, parsed, record)
        body.write(struct.pack(">i", one.tell()) + one.getvalue())
        count += 1
    content = struct.pack(">ii", AVRO_BLOCK_VERSION, count) + body.getvalue()
    header = _map({INSTANT_TIME: instant, SCHEMA: json.dumps(schema, separators=(",", ":"))})
    rest = (
        struct.pack(">ii", FORMAT_VERSION, AVRO_DATA_BLOCK)
        + header
        + struct.pack(">q", len(content))
        + content
        + _map({})
    )
    block = BLOCK_MAGIC + struct.pack(">q", len(rest) + 8) + rest
    return block + struct.pack(">q", len(block))


HEAD_BYTES = 6 + 8 + 4 + 4 + 4 + 4 + 4 + 17  # up to a 17-digit instant, the header's first value


def block_instant(head: bytes) -> str | None:
    """The instant of a log file's first block from its first `HEAD_BYTES` bytes (None: not a
    block whose header starts with its instant)."""
    if len(head) < HEAD_BYTES or head[:6] != BLOCK_MAGIC:
        return None
    count, key, length = struct.unpack_from(">iii", head, 22)
    if count < 1 or key != INSTANT_TIME or length != 17:
        return None
    return head[34 : 34 + length].decode("ascii", errors="replace")
