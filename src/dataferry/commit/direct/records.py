"""The direct committer's commit records: `_dataferry/commits/<jobUUID>.json`, a committed
job's complete file list, written in one write once its stray files are gone.

Readers of committed files go by these records, and a rollback keeps the files they list, so a
damaged record is never taken for an absent one: it is read with a cap
(COMMIT_RECORD_MAX_BYTES) and checked field by field, and whatever is wrong with it gives one
ValidationError naming its URL and the field at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ...errors import ValidationError
from ...store import Store
from ..records.recordio import (
    MiB,
    get_int,
    get_list,
    get_number,
    get_str,
    need_object,
    parse_json,
    read_record,
    str_list,
)

COMMIT_RECORD_VERSION = 1  # a record without one is of version 1
COMMIT_RECORD_MAX_BYTES = 1024 * MiB
"""The largest commit record read (1 GiB): it lists every file of a job (about 100 bytes a
file, so some ten million files), and is written from memory in one write."""


@dataclass(frozen=True)
class CommitRecord:
    """`_dataferry/commits/<jobUUID>.json`: a committed job's complete file list."""

    job_uuid: str
    job_id: str
    committed: float
    files: list[str]

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "version": COMMIT_RECORD_VERSION,
                "jobId": self.job_uuid,
                "job": self.job_id,
                "committed": self.committed,
                "files": self.files,
            }
        ).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, source: str, job_uuid: str = "") -> CommitRecord:
        """Parse and check; with `job_uuid` (the one its name gives), the record must be that
        job's. One ValidationError naming `source` and the field otherwise."""
        data = need_object(parse_json(raw, source), source)
        if get_int(data, "version", source, default=COMMIT_RECORD_VERSION) != COMMIT_RECORD_VERSION:
            raise ValidationError(f"unknown version {data['version']!r}", source, "version")
        uuid = get_str(data, "jobId", source, nonempty=True)
        if job_uuid and uuid != job_uuid:
            raise ValidationError(
                f"is the record of job {uuid!r}, not {job_uuid!r}", source, "jobId"
            )
        files = get_list(data, "files", source, required=True)
        return cls(
            uuid,
            get_str(data, "job", source, default=""),
            get_number(data, "committed", source, default=0.0),
            str_list(files, source, "files", nonempty=True),
        )


def read_commit_record(store: Store, path: str, job_uuid: str = "") -> CommitRecord:
    """The commit record at `path`, read with the cap and checked. NotFound if absent; one
    ValidationError naming the file otherwise (never taken for an absent one: rolling a job
    back as if it had no record would delete its committed files)."""
    raw = read_record(store, path, COMMIT_RECORD_MAX_BYTES)
    return CommitRecord.from_bytes(raw, store.full_url(path), job_uuid)
