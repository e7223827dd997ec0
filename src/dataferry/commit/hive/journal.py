"""The load journal: what a load will do, written before it moves anything.

Steps are idempotent moves. A step whose source is gone and whose destination exists is done;
one whose source exists is still to do. So a load that stopped anywhere can be completed by
running the journal again, or rolled back by running its done steps backwards. Hive's own load
cannot do either.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Literal

from ...errors import ValidationError
from ...store import Store

Phase = Literal["aside", "in"]


@dataclass(frozen=True)
class Step:
    """Move `src` to `dst` (a directory rename if `directory`, else one file)."""

    phase: Phase
    src: str
    dst: str
    directory: bool = False


@dataclass
class Journal:
    job_id: str
    mode: str
    table: str
    partitions: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    state: str = "planned"  # planned -> moved -> registered

    def to_bytes(self) -> bytes:
        data = asdict(self)
        return json.dumps(data, indent=1).encode()

    @classmethod
    def from_bytes(cls, raw: bytes, source: str) -> Journal:
        try:
            data = json.loads(raw)
            steps = [Step(**s) for s in data.pop("steps")]
            return cls(**data, steps=steps)
        except (ValueError, TypeError, KeyError) as e:
            raise ValidationError(f"not a load journal: {e}", source) from None


def save_journal(store: Store, path: str, journal: Journal) -> None:
    """Write atomically: a temporary file renamed over the journal."""
    tmp = path + ".tmp"
    store.delete(tmp)
    store.write_bytes(tmp, journal.to_bytes())
    store.delete(path)
    store.rename(tmp, path)


def load_journal(store: Store, path: str) -> Journal | None:
    from ...errors import NotFound

    try:
        raw = store.read_bytes(path)
    except NotFound:
        return None
    return Journal.from_bytes(raw, store.full_url(path))
