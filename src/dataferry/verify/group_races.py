"""Two appenders meeting in one group commit (`commit/table/delta/group.py`,
`commit/table/iceberg/group.py`), for the
concurrent-appends family (`concurrent_appends.py`): job A's and job B's store operations are
paired so that the meeting happens every time, not by luck of timing.

    A publishes its commit request    -> B is started, A waits until B's request is out
    B publishes its commit request    -> B waits until A's log entry is decided
    A creates the group's log entry   -> B is let go (A waits for B's end), then A's fault
      (Iceberg: A's catalog commit)

so A's entry carries B (or, when A dies before it, B's entry carries A). `group_landed` is the
other order: B waits just before publishing (its base read before A's entry), A's entry carries
A alone and A dies before removing its request; B then finds A's request, landed, and must
leave it out: were the request's txn not looked for, A would be committed twice.
"""

from __future__ import annotations

import threading
from typing import Any

from ..commit.table.delta.group import GROUP_DIR
from ..commit.table.delta.log import LOG_DIR
from ..commit.table.iceberg.group import GROUP_DIR as ICEBERG_GROUP_DIR
from ..store import FaultRule, Op
from .harness import quiet_store, recovery_committer
from .race_parties import SecondJob, Side

# fault -> A's action at the group's log entry, and when
_AT_ENTRY = {
    "group_none": ("callback", "after"),
    "group_crash_before": ("crash", "before"),
    "group_crash_after": ("crash", "after"),
    "group_lost_answer": ("ambiguous", "after"),
    "group_landed": ("crash", "after"),
}
GROUP_FAULTS = tuple(_AT_ENTRY)
# committers whose appends commit by group: their requests, and the group's transaction
GROUPED = {"delta": GROUP_DIR, "iceberg": ICEBERG_GROUP_DIR}
MEET_S = 30.0  # how long one side waits for the other at a meeting point (a busy machine)
CREATE = frozenset({Op.CREATE_IF_ABSENT})
ENTRY = {
    "delta": {"kinds": CREATE, "path_glob": f"{LOG_DIR}/*.json"},
    "iceberg": {"kinds": frozenset({Op.TABLE_COMMIT})},  # the catalog's compare-and-swap
}


def grouped(committer: str) -> bool:
    return committer in GROUPED


class Meeting:
    """The paired rules of one group scenario (the module's table)."""

    def __init__(self, fault: str, second: SecondJob, committer: str = "delta") -> None:
        self.fault, self.second = fault, second
        self.requests, self.entry = GROUPED[committer], ENTRY[committer]
        self.b_ready = threading.Event()  # B's request is out (group_landed: about to be)
        self.release = threading.Event()  # A's log entry is decided: B goes on

    def rules_a(self) -> list[FaultRule]:
        action, when = _AT_ENTRY[self.fault]
        at_request = FaultRule(
            action="callback",
            when="after",
            kinds=CREATE,
            path_glob=f"{self.requests}/*",
            callback=self._meet,
        )
        at_entry = FaultRule(
            action=action,  # type: ignore[arg-type]
            when=when,  # type: ignore[arg-type]
            callback=self._let_b_go,
            **self.entry,
        )
        return [at_request, at_entry]

    def rules_b(self) -> list[FaultRule]:
        when = "before" if self.fault == "group_landed" else "after"
        return [
            FaultRule(
                action="callback",
                when=when,  # type: ignore[arg-type]
                kinds=CREATE,
                path_glob=f"{self.requests}/*",
                callback=self._b_waits,
            )
        ]

    def _meet(self, *_: Any) -> None:
        self.second.start()
        self.b_ready.wait(MEET_S)

    def _b_waits(self, *_: Any) -> None:
        self.b_ready.set()
        self.release.wait(MEET_S)

    def _let_b_go(self, *_: Any) -> None:
        self.release.set()
        self.second.wait(MEET_S)

    def verdict(self, committer: str, url: str, options: dict[str, Any], a: Side, b: Side) -> str:
        """Whether A's and B's transactions are in one version of the table (the meeting
        happened), for the scenario's outcome."""
        from ..commit.table.delta.commit_info import jobs_of
        from ..commit.table.iceberg.catalog import jobs_of as iceberg_jobs_of

        table = recovery_committer(committer, quiet_store(url), "append", options)
        dt = table.table()
        if dt is None:
            return ", no table"
        if committer == "iceberg":
            named = [iceberg_jobs_of(s.summary) for s in dt.snapshots()]
        else:
            named = [jobs_of(e) for e in dt.history()]
        together = any({a.uuid, b.uuid} <= jobs for jobs in named)
        return ", in one entry" if together else ", in two entries"
