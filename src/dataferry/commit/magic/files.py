"""`.pending` and `.pendingset` in the JSON shapes of Hadoop's S3A committers.

A `.pending` (SinglePendingCommit) holds what is needed to complete one multipart upload; a
`.pendingset` (PendingSet) gathers a task attempt's pending commits. `uri` is the destination
as Hadoop's `Path.toUri().toString()` prints it (percent-encoded, `store/uris.py`); `bucket` and
`destinationKey` are its S3 bucket and object key, plain text as S3 names them (S3A's
`pathToKey` takes the decoded path). Loading reads `uri`, decoded once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...errors import ConfigError, ValidationError
from ...store import Store
from ...store.etags import multipart_etag
from ...store.uris import MalformedUri, from_hadoop_uri, to_hadoop_uri

PENDING_VERSION = 2
PENDINGSET_VERSION = 2
TASK_ATTEMPT_KEY = "task.attempt.id"


@dataclass
class PendingCommit:
    path: str  # store-relative destination
    upload_id: str
    etags: list[str]
    length: int
    job_id: str = ""
    task_id: str = ""
    created: int = field(default_factory=lambda: int(time.time() * 1000))

    def expected_etag(self) -> str:
        return multipart_etag(self.etags)

    def to_json(self, store: Store) -> dict[str, Any]:
        bucket, _, key = store.full_url(self.path).split("://", 1)[1].partition("/")
        now = int(time.time() * 1000)
        return {
            "version": PENDING_VERSION,
            "filename": key.rsplit("/", 1)[-1],
            "uri": to_hadoop_uri(store, self.path),
            "uploadId": self.upload_id,
            "bucket": bucket,
            "destinationKey": key,
            "created": self.created,
            "saved": now,
            "date": datetime.now(UTC).isoformat(),
            "jobId": self.job_id,
            "taskId": self.task_id,
            "text": "",
            "etags": list(self.etags),
            "extraData": {},
            "iostatistics": {},
            "length": self.length,
        }

    @classmethod
    def from_json(cls, data: Any, store: Store, source: str) -> PendingCommit:
        if not isinstance(data, dict):
            raise ValidationError("not a JSON object", source)
        if data.get("version") != PENDING_VERSION:
            raise ValidationError(f"wrong version {data.get('version')!r}", source, "version")
        for key in ("uploadId", "bucket", "destinationKey", "uri"):
            if not isinstance(data.get(key), str):
                raise ValidationError("empty or missing", source, key)
            # a store without buckets (a local directory behind the S3 model) has none
            if not data[key] and (key != "bucket" or _has_authority(data["uri"])):
                raise ValidationError("empty or missing", source, key)
        etags = data.get("etags")
        if (
            not isinstance(etags, list)
            or not etags
            or not all(isinstance(e, str) and e for e in etags)
        ):
            raise ValidationError("must be a non-empty list of non-empty strings", source, "etags")
        length = data.get("length", 0)
        if not isinstance(length, int) or length < 0:
            raise ValidationError(f"{length!r} is not a non-negative integer", source, "length")
        try:
            path = from_hadoop_uri(store, data["uri"])
        except MalformedUri as e:
            raise ValidationError(str(e), source, "uri") from None
        except ConfigError:
            raise ValidationError(
                f"destination {data['uri']!r} is outside {store.full_url()}", source, "uri"
            ) from None
        return cls(
            path,
            data["uploadId"],
            list(etags),
            length,
            data.get("jobId", ""),
            data.get("taskId", ""),
            data.get("created", 0),
        )


def _has_authority(uri: Any) -> bool:
    return isinstance(uri, str) and "://" in uri and bool(uri.split("://", 1)[1].split("/", 1)[0])


@dataclass
class PendingSet:
    job_id: str
    task_attempt_id: str
    commits: list[PendingCommit] = field(default_factory=list)

    def to_bytes(self, store: Store) -> bytes:
        return json.dumps(
            {
                "version": PENDINGSET_VERSION,
                "jobId": self.job_id,
                "commits": [c.to_json(store) for c in self.commits],
                "extraData": {TASK_ATTEMPT_KEY: self.task_attempt_id},
                "iostatistics": {},
            },
            indent=1,
            ensure_ascii=False,
        ).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, store: Store, source: str) -> PendingSet:
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValidationError(f"not valid JSON: {e}", source) from None
        if not isinstance(data, dict) or data.get("version") != PENDINGSET_VERSION:
            raise ValidationError(
                f"wrong version {data.get('version') if isinstance(data, dict) else None!r}",
                source,
                "version",
            )
        commits = [
            PendingCommit.from_json(c, store, f"{source} commits[{i}]")
            for i, c in enumerate(data.get("commits") or [])
        ]
        seen: set[str] = set()
        for c in commits:
            if c.path in seen:
                raise ValidationError(
                    f"destination {c.path!r} is written to by more than one pending commit",
                    source,
                    "commits",
                )
            seen.add(c.path)
        extra = data.get("extraData") or {}
        return cls(str(data.get("jobId", "")), str(extra.get(TASK_ATTEMPT_KEY, "")), commits)
