"""An attempt's uploads record: the keys it will upload, then the upload id of each.

Written (replaced whole) twice by task commit: with the keys before any upload starts, with the
ids before any part is sent. Whoever cleans up a job reads it to abort what the attempt left
pending: by id where it has one, by key where the attempt died between starting an upload and
recording its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ....errors import NotFound, ValidationError
from ....store import Store
from ...records.recordio import (
    TASK_RECORD_MAX_BYTES,
    get_int,
    get_list,
    get_str,
    get_str_map,
    need_object,
    str_list,
)
from ..uploads import dumps, read_json

UPLOADS_RECORD_VERSION = 1  # a record without one is of version 1
UPLOADS_RECORD_MAX_BYTES = TASK_RECORD_MAX_BYTES
"""The largest uploads record read (64 MiB): a key and an upload id per file of the attempt."""


@dataclass
class UploadsRecord:
    attempt_id: str
    keys: list[str]
    uploads: dict[str, str] = field(default_factory=dict)  # key -> upload id
    pendingset: str = ""  # full URL of the attempt's pendingset

    def to_bytes(self) -> bytes:
        return dumps(
            {
                "version": UPLOADS_RECORD_VERSION,
                "attempt": self.attempt_id,
                "keys": self.keys,
                "uploads": self.uploads,
                "pendingset": self.pendingset,
            }
        )

    @classmethod
    def load(cls, store: Store, path: str) -> UploadsRecord | None:
        """The record at `path`; None if it is gone. A damaged one (it is written whole, so
        one that does not parse was damaged after) raises one ValidationError naming it: it is
        all that names the attempt's uploads, so it is never taken for none."""
        try:
            data = read_json(store, path, UPLOADS_RECORD_MAX_BYTES)
        except NotFound:
            return None
        source = store.full_url(path)
        data = need_object(data, source)
        if (
            get_int(data, "version", source, default=UPLOADS_RECORD_VERSION)
            != UPLOADS_RECORD_VERSION
        ):
            raise ValidationError(f"unknown version {data['version']!r}", source, "version")
        keys = str_list(
            get_list(data, "keys", source, required=True), source, "keys", nonempty=True
        )
        uploads = get_str_map(data, "uploads", source)
        if not all(k and v for k, v in uploads.items()):
            raise ValidationError("empty key or upload id", source, "uploads")
        return cls(
            get_str(data, "attempt", source, nonempty=True),
            keys,
            uploads,
            get_str(data, "pendingset", source, default=""),
        )

    def unrecorded_keys(self) -> list[str]:
        return [k for k in self.keys if k not in self.uploads]
