"""`_SUCCESS`: the record that a job committed.

A zero-byte `_SUCCESS` is the classic FileOutputCommitter marker. A JSON `_SUCCESS` follows the
shape of Hadoop's SuccessData (written by the manifest and S3A committers), so files written by
Hadoop load here and ours load there: `name` must be exactly SUCCESS_NAME; unknown keys are kept
aside and ignored. `filenames` holds store URLs in memory (`Store.full_url`, plain text) and
Hadoop's encoded URIs in the file (`Path.toUri().toString()`, converted in `store/uris.py`).

A `_SUCCESS` is read with a cap (SUCCESS_MAX_BYTES) and checked field by field: whatever is
wrong with it gives one ValidationError naming its URL and the field at fault.
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...errors import NotFound, ValidationError
from ...store import Store
from ...store.uris import MalformedUri, hadoop_uri, store_url
from .recordio import MiB, is_finite_number, parse_json, read_record

SUCCESS_FILE = "_SUCCESS"
SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
FILENAME_LIMIT = 100  # Hadoop's SUCCESS_MARKER_FILE_LIMIT
SUCCESS_MAX_BYTES = 4 * MiB
"""The largest `_SUCCESS` (or summary report) read: it holds at most FILENAME_LIMIT file
names, the job's counters and diagnostics, some tens of KB even from Hadoop's large jobs."""
_COPY = re.compile(rf"{SUCCESS_FILE}(\.[0-9a-f]{{32}})?\.tmp")


def success_copy_name() -> str:
    """A name of its own for a hidden copy of `_SUCCESS` before it is renamed into place
    (`_SUCCESS.<random>.tmp`): the driver that wrote it, and only it, may delete it again,
    even while another (a taker finishing the same job) writes its own copy beside it."""
    return f"{SUCCESS_FILE}.{uuid.uuid4().hex}.tmp"


def is_success_copy(name: str) -> bool:
    """Whether a file's name is that of a hidden copy of `_SUCCESS` (a job's leftover)."""
    return _COPY.fullmatch(name) is not None


@dataclass
class SuccessData:
    """Hadoop's SuccessData / ManifestSuccessData. `filenames`: committed files as store URLs
    (at most FILENAME_LIMIT are saved)."""

    committer: str = ""
    description: str = ""
    job_id: str = ""
    job_id_source: str = "JobID"
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    date: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    hostname: str = field(default_factory=socket.gethostname)
    metrics: dict[str, int] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)
    filenames: list[str] = field(default_factory=list)
    iostatistics: dict[str, Any] = field(default_factory=dict)
    state: str | None = None
    stage: str | None = None
    success: bool = True

    @classmethod
    def for_job(cls, committer: str, job: Any, description: str, **fields: Any) -> SuccessData:
        """The record of a committed job: our job ids and state, whatever the committer."""
        return cls(
            committer=committer,
            description=description,
            job_id=job.job_uuid,
            job_id_source="dataferry.job_uuid",
            state="committed",
            stage="committer_commit_job",
            **fields,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": SUCCESS_NAME,
            "timestamp": self.timestamp,
            "date": self.date,
            "hostname": self.hostname,
            "committer": self.committer,
            "description": self.description,
            "jobId": self.job_id,
            "jobIdSource": self.job_id_source,
            "metrics": dict(sorted(self.metrics.items())),
            "diagnostics": dict(sorted(self.diagnostics.items())),
            "filenames": [hadoop_uri(f) for f in self.filenames[:FILENAME_LIMIT]],
            "iostatistics": self.iostatistics,
            "success": self.success,
        }
        if self.state is not None:
            out["state"] = self.state
        if self.stage is not None:
            out["stage"] = self.stage
        return out

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, data: Any, source: str = "_SUCCESS") -> SuccessData:
        if not isinstance(data, dict):
            raise ValidationError("not a JSON object", source)
        name = data.get("name")
        if name != SUCCESS_NAME:
            raise ValidationError(f"wrong name {name!r}, expected {SUCCESS_NAME!r}", source, "name")

        def typed(key: str, kind: type | tuple[type, ...], default: Any) -> Any:
            value = data.get(key, default)
            if value is None:
                return default
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ValidationError(f"expected {kind}, got {type(value).__name__}", source, key)
            return value

        metrics = typed("metrics", dict, {})
        for k, v in metrics.items():
            if v is None or not is_finite_number(v):
                raise ValidationError(f"metric {k!r} is not a number", source, "metrics")
        diagnostics = typed("diagnostics", dict, {})
        filenames = typed("filenames", list, [])
        if not all(isinstance(f, str) for f in filenames):
            raise ValidationError("every entry must be a string", source, "filenames")
        try:
            urls = [store_url(f) for f in filenames]  # decoded once
        except MalformedUri as e:
            raise ValidationError(str(e), source, "filenames") from None
        return cls(
            committer=typed("committer", str, ""),
            description=typed("description", str, ""),
            job_id=typed("jobId", str, ""),
            job_id_source=typed("jobIdSource", str, ""),
            timestamp=typed("timestamp", int, 0),
            date=typed("date", str, ""),
            hostname=typed("hostname", str, ""),
            metrics={k: int(v) for k, v in metrics.items()},
            diagnostics={str(k): str(v) for k, v in diagnostics.items()},
            filenames=urls,
            iostatistics=typed("iostatistics", dict, {}),
            state=typed("state", str, None),
            stage=typed("stage", str, None),
            success=typed("success", bool, True),
        )

    @classmethod
    def from_bytes(cls, raw: bytes, source: str = "_SUCCESS") -> SuccessData:
        return cls.from_json(parse_json(raw, source), source)


@dataclass(frozen=True)
class SuccessMarker:
    """What `_SUCCESS` turned out to be: a legacy empty marker, or a SuccessData record."""

    path: str
    data: SuccessData | None  # None: zero-byte classic FileOutputCommitter marker

    @property
    def legacy(self) -> bool:
        return self.data is None


def load_success(location: str) -> SuccessMarker:
    """Load a `_SUCCESS` (or summary report) from a directory or a file location."""
    from ...store import open_location

    store, name = open_location(location, SUCCESS_FILE)
    marker = read_success(store, name)
    if marker is None:
        what = (
            "no such file (no job has committed to this directory)"
            if name == SUCCESS_FILE
            else "no such file or directory"
        )
        raise NotFound(f"{store.full_url(name)}: {what}", name)
    return marker


def read_success(store: Store, path: str = SUCCESS_FILE) -> SuccessMarker | None:
    """Load `_SUCCESS` from a store; None if absent; one ValidationError naming it if it is
    malformed, a directory or larger than SUCCESS_MAX_BYTES."""
    try:
        raw = read_record(store, path, SUCCESS_MAX_BYTES)
    except NotFound:
        return None
    if not raw:
        return SuccessMarker(path, None)
    return SuccessMarker(path, SuccessData.from_bytes(raw, store.full_url(path)))
