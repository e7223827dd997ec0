"""An Iceberg job's DataFiles drafted by the tasks that wrote the files, not by its job commit.

A task reads each file's footer at its task commit anyway (`footers.py`). With the table's
schema, spec and metrics properties, which the driver puts in the job's config before any task
runs (its `basis`, `basis_text`), the task also works out what the file's DataFile holds (its
statistics and partition record, `FileBuilder`) and sends it with the file's facts in its
commit message: the per-file work runs in the tasks, side by side, while they write. The job
commit makes each DataFile from its draft when the table it commits to has the same basis
(compared by value), and from the file's footer otherwise (read then, as before): a file
without a draft (a task that could not make one, a file the table cannot take, whose error the
job commit then raises as it always did), a recovered job (drafts are not in the intent), a
table whose schema, spec or metrics changed since the job began.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow.parquet as pq

from .files import FileBuilder, data_file

METRICS = "write.metadata.metrics."  # the properties that choose what a DataFile keeps
DRAFT_KEY = "iceberg_data_file"  # a file's draft in its facts (the message's "files")
_COUNTS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
_BOUNDS = ("lower_bounds", "upper_bounds")


def basis_text(schema: Any, spec: Any, properties: Mapping[str, str]) -> str:
    """What a DataFile depends on besides its file, as text: the schema's fields (not its
    id), the spec's fields (not its id), the metrics properties."""
    metrics = sorted((k, v) for k, v in properties.items() if k.startswith(METRICS))
    return json.dumps(
        {
            "schema": schema.model_dump_json(exclude={"schema_id"}),
            "spec": [f.model_dump_json() for f in spec.fields],
            "metrics": metrics,
        },
        sort_keys=True,
    )


def basis_of(metadata: Any) -> str:
    """The basis of the table `metadata` describes (its current schema and default spec)."""
    return basis_text(metadata.schema(), metadata.spec(), metadata.properties)


def built_for(metadata: Any, paths: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """What a job's DataFiles depend on besides their footers and the spec's id (stamped on
    them when used): the basis of the table `metadata` describes and the files. By value,
    not by the table's uuid and ids: a table the job creates is built twice, in memory at the
    plan and by the catalog's create transaction, alike in all of these (the transaction's
    spec is its second, id 1, and it adds the name mapping, not a metrics property)."""
    return basis_of(metadata), tuple(paths)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@lru_cache(maxsize=8)
def _builder(text: str) -> FileBuilder:
    """The builder of a basis (parsed once per process and job basis)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema

    basis = json.loads(text)
    schema = Schema.model_validate_json(basis["schema"])
    spec = PartitionSpec(*[PartitionField.model_validate_json(f) for f in basis["spec"]])
    return FileBuilder(schema, spec, dict(basis["metrics"]))


def draft(text: str, path: str, size: int, meta: pq.FileMetaData) -> dict[str, Any] | None:
    """The draft of the DataFile of the file at `path` (its size and footer) on basis `text`,
    JSON-ready; None where the task cannot make one (the job commit builds it from the
    footer, and raises any error of a file the table cannot take, as before)."""
    from pyiceberg.conversions import from_bytes, to_bytes

    try:
        build = _builder(text)
        stats, partition = build.parts(path, meta)
        values: list[str | None] = []
        for i, f in enumerate(build.spec.fields):
            value = partition[i]
            if value is None:
                values.append(None)
                continue
            kind = f.transform.result_type(build.schema.find_field(f.source_id).field_type)
            raw = to_bytes(kind, value)
            if from_bytes(kind, raw) != value:
                return None  # a value its bytes do not give back: built from the footer
            values.append(_text(raw))
    except Exception:
        return None
    encoded: dict[str, Any] = {k: _pairs(stats[k], int) for k in _COUNTS}
    encoded.update({k: _pairs(stats[k], _text) for k in _BOUNDS})
    encoded["record_count"] = stats["record_count"]
    encoded["split_offsets"] = stats["split_offsets"]
    return {"basis": digest(text), "size": size, "partition": values, "stats": encoded}


@dataclass(frozen=True)
class Drafts:
    """The drafts a job's tasks sent, by file path."""

    job_uuid: str = ""
    by_path: Mapping[str, Mapping[str, Any]] | None = None

    @classmethod
    def of(cls, job_uuid: str, files: Mapping[str, Mapping[str, Any]]) -> Drafts:
        found = {p: d[DRAFT_KEY] for p, d in files.items() if d.get(DRAFT_KEY)}
        return cls(job_uuid, found)

    def data_files(
        self, metadata: Any, paths: Sequence[str], file_uri: Callable[[str], str]
    ) -> dict[str, Any]:
        """The DataFiles of `paths` drafted on the basis of the table `metadata` describes,
        by path (a file without such a draft is left out)."""
        if not self.by_path:
            return {}
        basis = basis_of(metadata)
        build = _builder(basis)
        want = digest(basis)
        made: dict[str, Any] = {}
        for path in paths:
            found = self.by_path.get(path)
            if found is None or found.get("basis") != want:
                continue
            partition = _partition(build, found["partition"])
            stats = _stats(found["stats"])
            uri = file_uri(path)
            made[path] = data_file(uri, found["size"], partition, metadata.default_spec_id, stats)
        return made


def _partition(build: FileBuilder, values: Sequence[str | None]) -> Any:
    from pyiceberg.conversions import from_bytes
    from pyiceberg.typedef import Record

    out = []
    for f, value in zip(build.spec.fields, values, strict=True):
        if value is None:
            out.append(None)
            continue
        kind = f.transform.result_type(build.schema.find_field(f.source_id).field_type)
        out.append(from_bytes(kind, base64.b64decode(value)))
    return Record(*out)


def _stats(encoded: Mapping[str, Any]) -> dict[str, Any]:
    stats: dict[str, Any] = {k: {int(i): v for i, v in encoded[k]} for k in _COUNTS}
    stats.update({k: {int(i): base64.b64decode(v) for i, v in encoded[k]} for k in _BOUNDS})
    stats["record_count"] = encoded["record_count"]
    stats["split_offsets"] = encoded["split_offsets"]
    return stats


def _pairs(values: Mapping[int, Any], convert: Callable[[Any], Any]) -> list[list[Any]]:
    return [[k, convert(v)] for k, v in values.items()]


def _text(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")
