"""The load journal: every move a load will make, planned before it moves anything.

It is the payload of the job's intent record. Steps are idempotent moves: a step whose source
is gone and whose destination exists is done; one whose source exists is still to do. So a load
that stopped anywhere can be completed by running the journal again, or rolled back by running
its steps backwards. Hive's own load can do neither.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ...errors import ValidationError

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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str) -> Journal:
        try:
            data = dict(data)
            steps = [Step(**s) for s in data.pop("steps")]
            return cls(**data, steps=steps)
        except (ValueError, TypeError, KeyError) as e:
            raise ValidationError(f"not a load journal: {e}", source) from None
