"""Timeline metadata Hudi keeps in Avro: in table version 6 (Hudi 0.x) the commit actions'
files (`.commit`, `.replacecommit`, `.deltacommit`) are JSON, while `.rollback`, `.clean`,
`.restore`, `.savepoint` and the plans of the table services are Avro object container files
(`TimelineMetadataUtils.serializeAvroMetadata`: one record, no codec). Java Hudi decodes a
`.rollback` when it loads the timeline for a write, a clean or `show_rollbacks`, and fails on
anything else; hudi-rs ignores the file.

`ROLLBACK_SCHEMA` is `HoodieRollbackMetadata` as Hudi 0.15 declares it
(hudi-common/src/main/avro/HoodieRollbackMetadata.avsc), field for field.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from ....extras import require

_STRING = {"type": "string", "avro.java.string": "String"}
_STRINGS = {"type": "array", "items": _STRING}
_LOG_FILES = ["null", {"type": "map", "values": "long", "avro.java.string": "String"}]

ROLLBACK_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "startRollbackTime", "type": _STRING},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": _STRINGS},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": _STRING},
                        {"name": "successDeleteFiles", "type": _STRINGS},
                        {"name": "failedDeleteFiles", "type": _STRINGS},
                        {"name": "rollbackLogFiles", "type": _LOG_FILES, "default": None},
                        {"name": "logFilesFromFailedCommit", "type": _LOG_FILES, "default": None},
                    ],
                },
                "avro.java.string": "String",
            },
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "instantsRollback",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "HoodieInstantInfo",
                    "fields": [
                        {"name": "commitTime", "type": _STRING},
                        {"name": "action", "type": _STRING},
                    ],
                },
                "default": [],
            },
            "default": [],
        },
    ],
}


def fastavro() -> Any:
    return require("fastavro", "Hudi's rollback metadata (Avro)")


def avro_file(schema: Mapping[str, Any], record: Mapping[str, Any]) -> bytes:
    """One record as an Avro object container file (no codec), as Hudi writes its Avro
    timeline metadata."""
    avro = fastavro()
    out = io.BytesIO()
    avro.writer(out, avro.parse_schema(dict(schema)), [dict(record)], codec="null")
    return out.getvalue()


def read_avro_file(data: bytes) -> dict[str, Any]:
    """The one record of an Avro object container file (a `.rollback`, `.clean`, ...)."""
    (record,) = list(fastavro().reader(io.BytesIO(data)))
    return record
