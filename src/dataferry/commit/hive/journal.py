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
from ...store import Store
from ..records.intent import Intent, intent_path
from ..records.recordio import get_bool, get_list, get_str, need_object, str_list

Phase = Literal["aside", "in"]
PHASES = ("aside", "in")


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
    def from_json(cls, data: Any, source: str) -> Journal:
        """The journal in an intent record (`source` names that record); each field checked,
        one ValidationError naming `source` and the field at fault. (Its size is the intent
        record's cap: the journal is read with it.)"""
        where = "payload.journal"
        data = need_object(data, source, where)
        steps = []
        for i, raw in enumerate(get_list(data, "steps", source, required=True, where=where)):
            at = f"{where}.steps[{i}]"
            step = need_object(raw, source, at)
            phase = step.get("phase")
            if phase not in PHASES:
                raise ValidationError(f"unknown phase {phase!r}", source, f"{at}.phase")
            steps.append(
                Step(
                    phase,
                    get_str(step, "src", source, nonempty=True, where=at),
                    get_str(step, "dst", source, nonempty=True, where=at),
                    get_bool(step, "directory", source, default=False, where=at),
                )
            )
        partitions = get_list(data, "partitions", source, where=where)
        return cls(
            job_id=get_str(data, "job_id", source, where=where),
            mode=get_str(data, "mode", source, nonempty=True, where=where),
            table=get_str(data, "table", source, where=where),
            partitions=str_list(partitions, source, f"{where}.partitions"),
            steps=steps,
        )


def journal_of(store: Store, job_dir: str, intent: Intent) -> Journal:
    """The load journal in a job's intent record; one ValidationError naming the record's URL
    and the field at fault if it is not one (the load is then neither run nor undone)."""
    source = store.full_url(intent_path(job_dir))
    payload = intent.payload if isinstance(intent.payload, dict) else {}
    if "journal" not in payload:
        raise ValidationError("missing", source, "payload.journal")
    return Journal.from_json(payload["journal"], source)
