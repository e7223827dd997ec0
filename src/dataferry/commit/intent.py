"""The intent record: what a job commit is about to do, saved before any change a reader sees.

Every committer's job commit writes one `_commit_intent.json` in the job's own directory once it
has planned everything (which files move or which uploads complete, which directories appear,
which existing entries the write mode replaces) and before it changes anything visible. From
then on the commit is decided: whatever interrupts it, `dataferry cleanup` (or the next job into
the destination) finishes it from this record, and the result is the one an uninterrupted
commit gives. A job directory without a readable intent record never changed anything a reader
sees, so it is rolled back instead.

Progress inside the record is marked by small files beside it (`_commit_intent.<phase>`), each
written once its phase is complete, so a resumed commit skips what cannot be repeated (the
deletes of a replaced data set must not run again once new files have moved in).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import NotFound, ValidationError
from ..store import Store, paths

INTENT_FILE = "_commit_intent.json"
INTENT_VERSION = 1


@dataclass
class Intent:
    """A decided job commit. `payload` is the committer's own plan (JSON-ready); `replace` are
    the visible entries of the destination the write mode removes before anything moves in."""

    job_id: str
    job_uuid: str
    committer: str
    mode: str
    payload: dict[str, Any] = field(default_factory=dict)
    replace: list[str] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    version: int = INTENT_VERSION

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, source: str) -> Intent:
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("version") != INTENT_VERSION:
                raise ValueError(f"version {data.get('version')!r} is not {INTENT_VERSION}")
            return cls(**data)
        except (ValueError, TypeError, AttributeError) as e:
            raise ValidationError(f"not a commit intent record: {e}", source) from None


def intent_path(job_dir: str) -> str:
    return paths.join(job_dir, INTENT_FILE)


def save_intent(store: Store, job_dir: str, intent: Intent) -> str:
    """Write the record in one write: a record cut short by a crash does not parse, and an
    unparsable record counts as none (nothing visible has changed yet)."""
    path = intent_path(job_dir)
    store.write_bytes(path, intent.to_bytes())
    return path


def load_intent(store: Store, job_dir: str) -> Intent | None:
    """The job's intent record, or None when there is none or it was cut short."""
    path = intent_path(job_dir)
    try:
        raw = store.read_bytes(path)
    except NotFound:
        return None
    try:
        return Intent.from_bytes(raw, store.full_url(path))
    except ValidationError:
        return None


def phase_done(store: Store, job_dir: str, phase: str) -> bool:
    return store.exists(paths.join(job_dir, f"{INTENT_FILE}.{phase}"))


def mark_phase(store: Store, job_dir: str, phase: str) -> None:
    store.write_bytes(paths.join(job_dir, f"{INTENT_FILE}.{phase}"), b"")
