"""What a crash-point run found: every scenario by kind, and the violations counted by invariant
(the shape `dataferry verify crash --json` prints)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from . import invariants as inv
from .harness import Scenario

KINDS = (
    "crash",
    "ambiguous",
    "existing_crash",
    "driver_kill",
    "zombie",
    "concurrent",
    "race_baseline",
    "skewed_clock",
    "taker_clock_ahead",
    "short_timeout",
    "longer_lease",
    "lease_expired",
    "cleanup_race",
    "two_takers",
    "overtaken_batches",
    "damaged_intent",
    "cleanup_writing",
    "table_landed",
    "damaged_record",
    "links",
    "forged_markers",
    "forged_records",
)
FORGED_KINDS = ("forged_markers", "forged_records")  # `--forged-markers`
# the schedules of `--races` (their baselines not counted): every kind after them but forgeries
RACE_KINDS = tuple(k for k in KINDS[KINDS.index("race_baseline") + 1 :] if k not in FORGED_KINDS)


@dataclass
class CrashReport:
    committer: str
    store: str
    crash_points: int
    scenarios: list[Scenario]  # the crash points on a fresh destination, and the crash-free run
    extra: list[Scenario] = field(default_factory=list)  # every other kind (Scenario.kind)
    skipped: dict[str, str] = field(default_factory=dict)  # kind -> why it did not run
    seed: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # family -> why it did not finish

    @property
    def all_scenarios(self) -> list[Scenario]:
        return [*self.scenarios, *self.extra]

    def of_kind(self, kind: str) -> list[Scenario]:
        return [s for s in self.all_scenarios if s.kind == kind]

    @staticmethod
    def _count(scenarios: list[Scenario]) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for s in scenarios:
            counts.update(s.violated)
        return {name: counts.get(name, 0) for name in inv.ALL}

    @property
    def violations(self) -> dict[str, int]:
        """Violating scenarios per invariant, over every kind that ran."""
        return self._count(self.all_scenarios)

    @property
    def total_violations(self) -> int:
        return sum(self.violations.values())

    @property
    def outcomes(self) -> dict[str, int]:
        return dict(Counter(s.outcome for s in self.scenarios))

    @property
    def driver_kills(self) -> int:
        """Kill scenarios run (a child driver armed to die; the kill-free baselines not counted)."""
        return sum(1 for s in self.extra if s.kind == "driver_kill" and s.index is not None)

    @property
    def ambiguous_points(self) -> int:
        """Ambiguous-answer scenarios run (before, after, and with another writer's file)."""
        return len(self.of_kind("ambiguous"))

    @property
    def zombie_schedules(self) -> int:
        return len(self.of_kind("zombie"))

    @property
    def concurrent_runs(self) -> int:
        return len(self.of_kind("concurrent"))

    @property
    def race_schedules(self) -> int:
        """Live holders raced (skewed clocks, short timeout, cleanup, two takers), damaged
        records and links."""
        return sum(len(self.of_kind(k)) for k in RACE_KINDS)

    @property
    def forgeries(self) -> int:
        """Forged markers and forged records."""
        return sum(len(self.of_kind(k)) for k in FORGED_KINDS)

    def kinds(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for kind in KINDS:
            group = self.of_kind(kind)
            if not group:
                continue
            v = self._count(group)
            out[kind] = {
                "scenarios": len(group),
                "outcomes": dict(Counter(s.outcome for s in group)),
                "violations": v,
                "total_violations": sum(v.values()),
                "violating_scenarios": sum(1 for s in group if s.problems),
            }
        return out

    def to_json(self, examples: int = 20) -> dict[str, Any]:
        bad = [s for s in self.all_scenarios if s.problems]
        # one example per kind and violated invariant first, then the rest in order
        first: dict[tuple[str, str], Scenario] = {}
        for s in bad:
            for name in sorted(s.violated):
                first.setdefault((s.kind, name), s)
        picked = list(dict.fromkeys([*first.values(), *bad]))
        return {
            "committer": self.committer,
            "store": self.store,
            "crash_points": self.crash_points,
            "scenarios": len(self.scenarios),
            "outcomes": self.outcomes,
            "violations": self.violations,
            "total_violations": self.total_violations,
            "violating_scenarios": len(bad),
            "ambiguous_points": self.ambiguous_points,
            "driver_kills": self.driver_kills,
            "zombie_schedules": self.zombie_schedules,
            "concurrent_runs": self.concurrent_runs,
            "race_schedules": self.race_schedules,
            "existing_data_crash_points": len(self.of_kind("existing_crash")),
            "forgeries": self.forgeries,
            "kinds": self.kinds(),
            "skipped": dict(self.skipped),
            "errors": dict(self.errors),
            "seed": self.seed,
            "examples": [s.example() for s in picked[:examples]],
        }
