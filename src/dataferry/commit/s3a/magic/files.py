"""`.pending` and `.pendingset` in the JSON shapes of Hadoop's S3A committers.

A `.pending` (SinglePendingCommit) holds what is needed to complete one multipart upload; a
`.pendingset` (PendingSet) gathers a task attempt's pending commits. `uri` is the destination
as Hadoop's `Path.toUri().toString()` prints it (percent-encoded, `store/uris.py`); `bucket` and
`destinationKey` are its S3 bucket and object key, plain text as S3 names them (S3A's
`pathToKey` takes the decoded path). Loading takes the destination from `bucket` and
`destinationKey` on an S3 store (what S3A completes; Hadoop's magic committer puts the file's
magic path in `uri`), and from `uri`, decoded once, on a store without buckets.

The shapes are Hadoop 3.4's (HADOOP-18797 and after): a pendingset of version 3, its commits of
version 2, each etag an object `{"etag": "\"<md5>\"", "checksumAlgorithm", "checksum"}` with
the etag quoted as S3 returns it. Loading also takes version 2 pendingsets and plain string
etags (dataferry's earlier records). A pendingset's attempt is `extraData["task.attempt.id"]`
(dataferry's); Hadoop's magic committer names it only in each commit's `taskId`.

Both are read with a cap (PENDING_MAX_BYTES, PENDINGSET_MAX_BYTES) and parsed field by field:
whatever is wrong with a file gives one ValidationError naming its URL and the field at fault.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ....errors import ConfigError, ValidationError
from ....store import Store
from ....store.etags import multipart_etag
from ....store.uris import MalformedUri, from_hadoop_uri, to_hadoop_uri
from ...records.recordio import (
    TASK_RECORD_MAX_BYTES,
    MiB,
    get_int,
    get_list,
    get_str,
    get_str_map,
    need_object,
    parse_json,
    read_record,
)

PENDING_VERSION = 2
PENDINGSET_VERSION = 3  # Hadoop 3.4+ refuses any other
PENDINGSET_VERSIONS_READ = (2, 3)
S3_SCHEMES = ("s3", "s3a")
TASK_ATTEMPT_KEY = "task.attempt.id"
PENDING_MAX_BYTES = 2 * MiB
"""The largest `.pending` read (2 MiB): one upload's record, whose etag list is its only part
that grows, by about 40 bytes a part to S3's 10,000 parts (some 450 KB)."""
PENDINGSET_MAX_BYTES = TASK_RECORD_MAX_BYTES
"""The largest `.pendingset` read (64 MiB): one `.pending` per file the task wrote (about 1 KB
for a file of a few parts)."""


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
            "etags": [
                {"etag": _quoted(e), "checksumAlgorithm": None, "checksum": None}
                for e in self.etags
            ],
            "extraData": {},
            "iostatistics": {},
            "length": self.length,
            "partCount": len(self.etags),
        }

    @classmethod
    def from_bytes(cls, raw: bytes, store: Store, source: str) -> PendingCommit:
        return cls.from_json(parse_json(raw, source), store, source)

    @classmethod
    def from_json(cls, data: Any, store: Store, source: str, where: str = "") -> PendingCommit:
        """`where` names the record inside its file (`commits[3]` in a pendingset)."""

        def name(key: str) -> str:
            return f"{where}.{key}" if where else key

        data = need_object(data, source, where)
        version = data.get("version")
        if version != PENDING_VERSION or isinstance(version, bool):
            raise ValidationError(f"wrong version {version!r}", source, name("version"))
        for key in ("uploadId", "bucket", "destinationKey", "uri"):
            if not isinstance(data.get(key), str):
                raise ValidationError("empty or missing", source, name(key))
            # a store without buckets (a local directory behind the S3 model) has none
            if not data[key] and (key != "bucket" or _has_authority(data.get("uri"))):
                raise ValidationError("empty or missing", source, name(key))
        etags = data.get("etags")
        if isinstance(etags, list):
            etags = [e.get("etag") if isinstance(e, dict) else e for e in etags]
        if (
            not isinstance(etags, list)
            or not etags
            or not all(isinstance(e, str) and e.strip('"') for e in etags)
        ):
            raise ValidationError(
                "must be a non-empty list of non-empty strings", source, name("etags")
            )
        length = get_int(data, "length", source, default=0, where=where)
        created = get_int(data, "created", source, default=0, where=where)
        job_id = get_str(data, "jobId", source, default="", where=where)
        task_id = get_str(data, "taskId", source, default="", where=where)
        try:
            path = _destination(store, data) or from_hadoop_uri(store, data["uri"])
        except MalformedUri as e:
            raise ValidationError(str(e), source, name("uri")) from None
        except ConfigError:
            raise ValidationError(
                f"destination {data['uri']!r} (key {data['destinationKey']!r}) is outside "
                f"{store.full_url()}",
                source,
                name("destinationKey"),
            ) from None
        etags = [_unquoted(e) for e in etags]
        return cls(path, data["uploadId"], etags, length, job_id, task_id, created)


def _quoted(etag: str) -> str:
    return etag if etag.startswith('"') else f'"{etag}"'


def _unquoted(etag: str) -> str:
    """The part tag as the store gave it: S3 returns ETags quoted and the records keep them so
    (Hadoop's shape), but the stores take them bare, and Azure's block ids and GCS's session
    marks, quoted the same way on save, are no ETags at all."""
    quoted = len(etag) >= 2 and etag[0] == etag[-1] == '"'
    return etag[1:-1] if quoted else etag


def _destination(store: Store, data: dict[str, Any]) -> str:
    """The store-relative destination named by `bucket` and `destinationKey` on an S3 store
    ("" elsewhere); ConfigError if it is outside the store."""
    scheme, _, rest = store.full_url().partition("://")
    if scheme not in S3_SCHEMES:
        return ""
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    key = data["destinationKey"]
    if data["bucket"] != bucket or not key.startswith(f"{prefix}/" if prefix else ""):
        raise ConfigError(f"s3://{data['bucket']}/{key} is outside {store.full_url()}")
    return key[len(prefix) + 1 :] if prefix else key


def read_pending(store: Store, path: str) -> PendingCommit:
    """The `.pending` at `path`, read with the cap and checked. NotFound if absent; one
    ValidationError naming the file otherwise."""
    raw = read_record(store, path, PENDING_MAX_BYTES)
    return PendingCommit.from_bytes(raw, store, store.full_url(path))


def _has_authority(uri: Any) -> bool:
    return isinstance(uri, str) and "://" in uri and bool(uri.split("://", 1)[1].split("/", 1)[0])


@dataclass
class PendingSet:
    job_id: str
    task_attempt_id: str
    commits: list[PendingCommit] = field(default_factory=list)

    def attempt(self) -> str:
        """The task attempt that saved it: dataferry's extraData entry, else the attempt id
        Hadoop's magic committer gives every commit as `taskId`; "" if neither says."""
        if self.task_attempt_id:
            return self.task_attempt_id
        named = {c.task_id for c in self.commits}
        if len(named) == 1 and (only := named.pop()).startswith("attempt_"):
            return only
        return ""

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
        data = need_object(parse_json(raw, source), source)
        version = data.get("version")
        if version not in PENDINGSET_VERSIONS_READ or isinstance(version, bool):
            raise ValidationError(f"wrong version {version!r}", source, "version")
        commits = [
            PendingCommit.from_json(c, store, source, f"commits[{i}]")
            for i, c in enumerate(get_list(data, "commits", source))
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
        extra = get_str_map(data, "extraData", source)
        job_id = get_str(data, "jobId", source, default="")
        return cls(job_id, extra.get(TASK_ATTEMPT_KEY, ""), commits)


def read_pendingset_file(store: Store, path: str, source: str = "") -> PendingSet:
    """The `.pendingset` at `path` of `store`, read with the cap and checked (its URIs name
    `store`). NotFound if absent; one ValidationError naming the file otherwise."""
    raw = read_record(store, path, PENDINGSET_MAX_BYTES)
    return PendingSet.from_bytes(raw, store, source or store.full_url(path))
