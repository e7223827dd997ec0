"""The `protocol` action of a Delta table dataferry creates or changes, and the tables
dataferry may write to, as deltalake (delta-rs 1.x) decides them.

    a new table                    (1, 2); a `timestamp_ntz` column anywhere in the schema:
                                   (3, 7) with reader and writer feature `timestampNtz`;
                                   `delta.enableChangeDataFeed=true`: writer 4, or writer
                                   feature `changeDataFeed` at (3, 7); `delta.minWriterVersion`
                                   2..4 taken as given
    a schema a write changes       the table's protocol, upgraded to (3, 7) with `timestampNtz`
                                   when the new schema needs it (the legacy versions' implied
                                   features listed, as PROTOCOL.md asks)
    a table dataferry writes to    every writer feature one dataferry honours (its writes add
                                   and remove whole files and carry no column mapping, row ids,
                                   in-commit timestamps, constraints or generated columns)

`check_configuration` refuses, when the job is configured, a table property deltalake's own
writer refuses or one whose feature dataferry's commits cannot keep.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ....errors import ConfigError

# table properties a table dataferry creates may carry (delta-rs' `TableProperty` names
# whose feature needs nothing of the writer beyond whole files)
PLAIN_PROPERTIES = frozenset(
    {
        "delta.appendOnly",
        "delta.autoOptimize.autoCompact",
        "delta.autoOptimize.optimizeWrite",
        "delta.checkpointInterval",
        "delta.checkpoint.writeStatsAsJson",
        "delta.checkpoint.writeStatsAsStruct",
        "delta.checkpointPolicy",
        "delta.dataSkippingNumIndexedCols",
        "delta.dataSkippingStatsColumns",
        "delta.deletedFileRetentionDuration",
        "delta.enableChangeDataFeed",
        "delta.enableExpiredLogCleanup",
        "delta.isolationLevel",
        "delta.logRetentionDuration",
        "delta.minReaderVersion",
        "delta.minWriterVersion",
        "delta.randomizeFilePrefixes",
        "delta.randomPrefixLength",
        "delta.setTransactionRetentionDuration",
        "delta.targetFileSize",
        "delta.tuneFileSizesForRewrites",
    }
)
# writer features whose rules a dataferry commit keeps (adds and removes of whole files)
WRITABLE_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "timestampNtz",
        "changeDataFeed",
        "domainMetadata",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
    }
)
# the features a legacy writer version implies (PROTOCOL.md, "Table Features")
_LEGACY_WRITER = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}
NTZ = "timestampNtz"
# column metadata keys whose feature a writer must honour row by row
_COLUMN_FEATURES = {
    "delta.invariants": "invariants",
    "delta.generationExpression": "generatedColumns",
    "delta.identity.": "identityColumns",
}


@dataclass(frozen=True)
class Protocol:
    """A `protocol` action: versions and, at (3, 7), the features listed."""

    reader: int
    writer: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"minReaderVersion": self.reader, "minWriterVersion": self.writer}
        if self.reader_features is not None:
            out["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = list(self.writer_features)
        return out

    @classmethod
    def of(cls, dt: Any) -> Protocol:
        """deltalake's view of a table's protocol."""
        p = dt.protocol()
        return cls(
            p.min_reader_version,
            p.min_writer_version,
            tuple(p.reader_features) if p.reader_features is not None else None,
            tuple(p.writer_features) if p.writer_features is not None else None,
        )


def check_configuration(configuration: Mapping[str, str]) -> None:
    """Refuse a table property dataferry cannot create a table with, naming it."""
    for key, value in configuration.items():
        if key.startswith("delta.constraints."):
            why = "dataferry does not check constraints on the rows it writes"
        elif key not in PLAIN_PROPERTIES:
            why = (
                "deltalake refuses properties it does not know"
                if not key.startswith(("delta.enable", "delta.columnMapping", "delta.feature."))
                else "its feature needs writes dataferry does not make (deletion vectors, "
                "column mapping, row tracking, in-commit timestamps)"
            )
        elif key == "delta.minReaderVersion" and str(value) != "1":
            why = "dataferry creates tables at reader version 1, or 3 where a type needs it"
        elif key == "delta.minWriterVersion" and str(value) not in ("2", "3", "4"):
            why = "dataferry creates tables at writer version 2 to 4, or 7 where a type needs it"
        else:
            continue
        raise ConfigError(
            f"table property {key}={value!r}: {why}; create the table with deltalake "
            "(DeltaTable.create) first and write to it, or leave the property out"
        )


def needs_ntz(schema_string: str) -> bool:
    """Whether a Delta schema holds a `timestamp_ntz` anywhere (nested types included)."""

    def walk(node: Any) -> bool:
        if node == "timestamp_ntz":
            return True
        if isinstance(node, dict):
            return any(walk(v) for v in node.values())
        if isinstance(node, list):
            return any(walk(v) for v in node)
        return False

    return walk(json.loads(schema_string))


def _true(configuration: Mapping[str, str], key: str) -> bool:
    return str(configuration.get(key, "")).lower() == "true"


def new_protocol(schema_string: str, configuration: Mapping[str, str]) -> Protocol:
    """The protocol of a table created with this schema and these properties."""
    cdf = _true(configuration, "delta.enableChangeDataFeed")
    if needs_ntz(schema_string):
        writer = (NTZ, "changeDataFeed") if cdf else (NTZ,)
        return Protocol(3, 7, (NTZ,), writer)
    writer = int(configuration.get("delta.minWriterVersion", 2))
    return Protocol(1, max(writer, 4 if cdf else 2))


def upgraded(protocol: Protocol, schema_string: str) -> Protocol | None:
    """The protocol a table must move to for a new schema (None: it already allows it)."""
    if not needs_ntz(schema_string):
        return None
    if protocol.writer_features is not None and NTZ in protocol.writer_features:
        return None
    writer = list(protocol.writer_features or ())
    if protocol.writer < 7:
        writer = [f for v in range(2, protocol.writer + 1) for f in _LEGACY_WRITER.get(v, ())]
    reader = list(protocol.reader_features or ())
    if protocol.reader < 3 and protocol.reader >= 2:
        reader = ["columnMapping"]
    return Protocol(3, 7, (*reader, NTZ), (*writer, NTZ))


def check_writable(
    protocol: Protocol,
    configuration: Mapping[str, str],
    schema_string: str,
    removes: bool,
    where: str,
) -> None:
    """Refuse a table whose protocol asks of its writers what a dataferry commit does not
    do, naming the feature. Deletion vectors are kept by appends (a write that `removes`
    files would have to name each file's vector)."""
    writable = WRITABLE_FEATURES if removes else WRITABLE_FEATURES | {"deletionVectors"}
    if protocol.writer > 7:
        missing = [f"writer version {protocol.writer}"]
    elif protocol.writer == 7:
        missing = [f for f in protocol.writer_features or () if f not in writable]
    else:
        missing = []
    for key, feature in _COLUMN_FEATURES.items():
        if f'"{key}' in schema_string and feature not in missing:
            missing.append(feature)
    mapping = configuration.get("delta.columnMapping.mode", "none")
    if mapping != "none" and "columnMapping" not in missing:
        missing.append("columnMapping")
    if any(k.startswith("delta.constraints.") for k in configuration):
        missing.append("checkConstraints")
    if missing:
        raise ConfigError(
            f"{where} needs writers that keep {', '.join(missing)}, which dataferry's Delta "
            "commits do not; write to it with deltalake (or Spark)"
        )
