"""An attempt's uploads record: the keys it will upload, then the upload id of each.

Written (replaced whole) twice by task commit: with the keys before any upload starts, with the
ids before any part is sent. Whoever cleans up a job reads it to abort what the attempt left
pending: by id where it has one, by key where the attempt died between starting an upload and
recording its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import ValidationError
from ...store import Store
from ..uploads import dumps, read_json


@dataclass
class UploadsRecord:
    attempt_id: str
    keys: list[str]
    uploads: dict[str, str] = field(default_factory=dict)  # key -> upload id
    pendingset: str = ""  # full URL of the attempt's pendingset

    def to_bytes(self) -> bytes:
        return dumps(
            {
                "attempt": self.attempt_id,
                "keys": self.keys,
                "uploads": self.uploads,
                "pendingset": self.pendingset,
            }
        )

    @classmethod
    def load(cls, store: Store, path: str) -> UploadsRecord | None:
        """The record at `path`; None if it is gone or was cut short (an attempt that died
        while writing it started no upload after it)."""
        from ...errors import NotFound

        try:
            data: Any = read_json(store, path)
        except (NotFound, ValidationError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            return None
        return cls(
            str(data.get("attempt", "")),
            [str(k) for k in data["keys"]],
            {str(k): str(v) for k, v in (data.get("uploads") or {}).items()},
            str(data.get("pendingset", "")),
        )

    def unrecorded_keys(self) -> list[str]:
        return [k for k in self.keys if k not in self.uploads]
