"""The intent record: what a job commit is about to do, saved before any change a reader sees.

Every committer's job commit writes one `_commit_intent.json` in the job's own directory once it
has planned everything (which files move or which uploads complete, which directories appear,
which existing entries the write mode replaces) and before it changes anything visible. From
then on the commit is decided: whatever interrupts it, `dataferry cleanup` (or the next job into
the destination) finishes it from this record, and the result is the one an uninterrupted
commit gives. A job directory without an intent record never changed anything a reader sees,
so it is rolled back instead. The record is written in one atomic write (complete or absent),
so a record that is there but does not parse was damaged after the commit was decided: it is
never taken as "no decision" (that would roll back a commit that may have replaced the earlier
data); recovery stops with `DamagedRecord` naming it and leaves everything in place.

Progress inside the record is marked by small files beside it (`_commit_intent.<phase>`), each
written once its phase is complete, so a resumed commit skips what cannot be repeated (the
deletes of a replaced data set must not run again once new files have moved in).

The committer's plan (`payload`) is its own frozen msgspec Struct, its `plan_type`: written as
the struct's JSON object, and read back through `decode_plan` alone, which converts it with
strict types and refuses a plan with a field missing or of the wrong type as `DamagedRecord`,
naming the record and the field's path (`payload.moves[0][1]`), before anything is done from it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...errors import CommitError, NotFound, StoreError, ValidationError
from ...store import Store, paths
from .recordio import parse_object, read_record

INTENT_FILE = "_commit_intent.json"
INTENT_VERSION = 1
INTENT_MAX_BYTES = 1 << 30  # a plan names every file a job commits; 1 GiB is millions of them
_FIELDS = {
    "job_id": str,
    "job_uuid": str,
    "committer": str,
    "mode": str,
    "payload": dict,
    "replace": list,
    "created": (int, float),
    "version": int,
}


class DamagedRecord(ValidationError):
    """A commit record that is there but cannot be read as one; nothing is decided from it."""


_AT = re.compile(r" - at `\$([^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `([^`]*)`")


def decode_plan(payload: Any, plan_type: type[msgspec.Struct] | None, source: str) -> Any:
    """The plan in an intent record's `payload` (parsed JSON) as the committer's `plan_type`,
    every field converted with strict types (no str for int, no 1.0 for 1, no 0 for False);
    DamagedRecord naming `source` and the field's path (`payload.moves[0][1]`) otherwise."""
    if plan_type is None:
        # left as parsed: for a reader of the record's job and committer alone (`leftovers`),
        # and the dict plan of a committer that declares no plan type (`plans.plan_type_of`)
        return payload
    try:
        return msgspec.convert(payload, plan_type, strict=True)
    except msgspec.ValidationError as e:
        text = str(e)
        at = _AT.search(text)
        path = at.group(1) if at else ""
        missing = _MISSING.match(text)
        if missing:
            path, text = f"{path}.{missing.group(1)}", "missing"
        elif at:
            text = text[: at.start()]
        raise DamagedRecord(
            f"{text} (not a {plan_type.__name__})", source, f"payload{path}"
        ) from None


@dataclass
class Intent:
    """A decided job commit. `payload` is the committer's own plan, an instance of its
    `plan_type` (a dict only for a committer that declares none); `replace` are the visible
    entries of the destination the write mode removes before anything moves in."""

    job_id: str
    job_uuid: str
    committer: str
    mode: str
    payload: Any = field(default_factory=dict)
    replace: list[str] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    version: int = INTENT_VERSION

    def to_bytes(self) -> bytes:
        """The record as one JSON object (the plan as its struct's JSON object)."""
        return msgspec.json.encode(self)

    @classmethod
    def from_bytes(
        cls, raw: bytes, source: str, plan_type: type[msgspec.Struct] | None = None
    ) -> Intent:
        """The record from its bytes, each field type-checked and the plan decoded as
        `plan_type` (`decode_plan`); DamagedRecord naming `source` and the field at fault
        otherwise."""
        data = parse_object(raw, source, "a commit intent record", DamagedRecord)
        if data.get("version") != INTENT_VERSION:
            raise DamagedRecord(
                f"version {data.get('version')!r:.40} is not {INTENT_VERSION}", source
            )
        for name, expected in _FIELDS.items():
            if name not in data:
                raise DamagedRecord("missing", source, name)
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, expected):
                raise DamagedRecord(f"wrong type {type(value).__name__}", source, name)
        if not all(isinstance(p, str) for p in data["replace"]):
            raise DamagedRecord("entries must be paths", source, "replace")
        fields = {name: data[name] for name in _FIELDS}
        fields["payload"] = decode_plan(data["payload"], plan_type, source)
        return cls(**fields)


def intent_path(job_dir: str) -> str:
    return paths.join(job_dir, INTENT_FILE)


STAGED_INTENT = ".staged-intent.json"  # hidden, and no phase marker (`_commit_intent.json.*`)


def save_intent(store: Store, job_dir: str, intent: Intent, staged: str | None = None) -> str:
    """Write the record in one atomic write: from here on the commit is decided. `staged`:
    the same record written ahead (`stage_intent`), renamed into place in one step instead."""
    path = intent_path(job_dir)
    if staged is not None:
        try:
            store.rename(staged, path)
            return path
        except StoreError:  # gone, or a record is there: written afresh below
            pass
    store.write_bytes(path, intent.to_bytes())
    return path


def stage_intent(store: Store, job_dir: str, intent: Intent) -> str:
    """Write a record ahead, under a hidden name in the job's directory, deciding nothing:
    where closing a file waits on the server (`slow_close`), that wait runs beside the claim,
    and `save_intent` is then one rename. A job that stops before it leaves the file to its
    directory's removal, and recovery never reads it."""
    path = paths.join(job_dir, STAGED_INTENT)
    store.write_bytes(path, intent.to_bytes())
    return path


def load_intent(
    store: Store, job_dir: str, plan_type: type[msgspec.Struct] | None = None
) -> Intent | None:
    """The job's intent record, its plan decoded as `plan_type` (the committer's; None: left
    as parsed, for a reader of the record's job and committer alone); None when there is none
    and no phase of a commit was marked. Raises DamagedRecord, naming the file and what was
    found, when the record is there but unreadable, its plan not a `plan_type` (or it is gone
    while a phase marker says the commit was under way)."""
    path = intent_path(job_dir)
    url = store.full_url(path)
    try:
        raw = read_record(store, path, INTENT_MAX_BYTES)
    except NotFound:
        if store.list_or_empty(path):
            # an object store has no directories: one "in the record's place" is keys under
            # its name with the record gone, which a file system would show as a directory
            raise DamagedRecord("is a directory (keys under its name), not a record", url) from None
        marked = phases_marked(store, job_dir)
        if marked and _holds_more_than_markers(store, job_dir):
            raise DamagedRecord(
                f"is missing, but the commit's phase {', '.join(marked)} was marked done "
                "(earlier data may already be replaced); left in place",
                url,
            ) from None
        return None
    except ValidationError as e:  # a directory, or over the cap
        raise DamagedRecord(str(e)) from None
    except StoreError as e:  # a link on the way, a refused read
        raise DamagedRecord(f"cannot be read: {e}", url) from None
    try:
        return Intent.from_bytes(raw, url, plan_type)
    except DamagedRecord as e:
        found = phases_marked(store, job_dir)
        seen = f" (phase {', '.join(found)} marked done)" if found else ""
        damaged = DamagedRecord(
            f"{e}; the commit was decided when it was written{seen}, so nothing is rolled "
            "back: the job directory is left in place"
        )
        damaged.source, damaged.field = e.source, e.field  # the record and the field at fault
        raise damaged from None


def _holds_more_than_markers(store: Store, job_dir: str) -> bool:
    """Whether a job directory whose record is gone holds anything but phase markers and empty
    directories (what a commit finished by another process, racing a late marker, leaves, and
    what a cleanup cut short between the record and its markers leaves: the markers go last,
    so they outlive the record): only a file might have needed the lost record to finish."""
    prefix = f"{INTENT_FILE}."
    for st in store.list_or_empty(job_dir):
        if st.name.startswith(prefix):
            continue
        if not st.is_dir or store.walk(st.path):
            return True
    return False


def phases_marked(store: Store, job_dir: str) -> list[str]:
    prefix = f"{INTENT_FILE}."
    return [
        st.name[len(prefix) :]
        for st in store.list_or_empty(job_dir)
        if st.name.startswith(prefix) and not st.is_dir
    ]


def phase_done(store: Store, job_dir: str, phase: str) -> bool:
    return store.exists(paths.join(job_dir, f"{INTENT_FILE}.{phase}"))


def mark_phase(store: Store, job_dir: str, phase: str) -> None:
    """Mark a phase of the decided commit done. Only beside its intent record: a record gone
    means the commit was finished (and its directory removed) by whoever took it over, and a
    late marker would leave a directory that looks like a commit whose record was lost."""
    if not store.exists(intent_path(job_dir)):
        raise CommitError(
            f"the intent record {store.full_url(intent_path(job_dir))} is gone (the commit was "
            f"finished by another process); phase {phase!r} is not marked"
        )
    store.write_bytes(paths.join(job_dir, f"{INTENT_FILE}.{phase}"), b"")
