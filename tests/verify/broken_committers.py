"""Deliberately broken committers: the referee must report each under the invariant it breaks.

Each is a small subclass of a real committer with one fault put in, registered under its own
name as an extra row of the committer registry. Tests add the rows for their own duration
(`monkeypatch.setitem(KNOWN, ...)`); a child driver (the referee's dead-driver scenarios) gets
them by importing this module first: `preload=(PRELOAD,)` makes it call `register()`.

| name                  | broken                                                  | invariant            |
|-----------------------|---------------------------------------------------------|----------------------|
| broken-drops-file     | task commit leaves the attempt's last file out of its   | complete_output      |
|                       | manifest                                                |                      |
| broken-ambiguous      | an ambiguous rename is taken as done, no etag check     | complete_output      |
| broken-no-rollback    | direct's abort deletes nothing                          | nothing_of_failed_job |
| broken-abort-uploads  | magic's abort leaves the job's uploads pending          | no_leftovers         |
| broken-dead-attempts  | magic's commit leaves dead attempts' uploads pending    | no_leftovers         |
| broken-journal-late   | hive moves the partitions before its journal (intent)   | nothing_of_failed_job |
|                       | is saved                                                |                      |

The race schedules (`verify/races.py`) have their own (`RACE_SPECS`, `RACE_BROKEN`; `register()`
adds them too):

| name                  | broken                                                  | invariant            |
|-----------------------|---------------------------------------------------------|----------------------|
| broken-unfenced       | the claim holder never checks that it still holds the   | see RACE_BROKEN      |
|                       | claim (its generation) before a step readers see        |                      |
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from dataferry.commit.direct.committer import DirectCommitter, DirectConfig
from dataferry.commit.hive.committer import HiveCommitter, move_aside, move_in
from dataferry.commit.hive.config import HiveConfig
from dataferry.commit.manifest.carried import CARRIED, carry
from dataferry.commit.manifest.committer import ManifestCommitter
from dataferry.commit.manifest.config import ManifestConfig
from dataferry.commit.manifest.files import TaskManifest
from dataferry.commit.manifest.layout import JobLayout
from dataferry.commit.manifest.stages import rename as rename_stage
from dataferry.commit.protocol import (
    Applied,
    CommitPlan,
    JobContext,
    StageContext,
    TaskAttemptContext,
    TaskCommitMessage,
)
from dataferry.commit.records.intent import Intent
from dataferry.commit.registry import KNOWN, CommitterSpec
from dataferry.commit.s3a.magic.committer import MagicCommitter, job_dir
from dataferry.commit.s3a.magic.config import MagicConfig
from dataferry.verify import invariants as inv

PRELOAD = f"{__name__}:register"
__all__ = ["BROKEN", "PRELOAD", "RACE_BROKEN", "RACE_SPECS", "SPECS", "register"]


class DropsAFile(ManifestCommitter):
    """Task commit saves a manifest without the attempt's last file: job commit never moves it,
    and cleanup deletes it with the attempt directory."""

    name = "broken-drops-file"

    def commit_task(
        self, task: TaskAttemptContext, written: Sequence[str] = ()
    ) -> TaskCommitMessage:
        message = super().commit_task(task, written)
        path = JobLayout.of(task.job).manifest_path(str(task.task_id))
        manifest = TaskManifest.from_bytes(self.store.read_bytes(path), self.store, path)
        manifest.files = manifest.files[:-1]
        saved = manifest.to_bytes(self.store)
        self.store.write_bytes(path, saved)
        extra = {**message.extra, CARRIED: carry(saved)}  # the copy it carries too
        return replace(message, files=message.files[:-1], extra=extra)


_assume_lock = threading.Lock()
_assuming = 0
_resolve = rename_stage.resolve_ambiguous


@contextmanager
def _renames_assumed_done() -> Iterator[None]:
    """`resolve_ambiguous` answers 'done' while any such commit runs (in any thread)."""
    global _assuming
    with _assume_lock:
        _assuming += 1
        rename_stage.resolve_ambiguous = lambda ctx, entry: "done"
    try:
        yield
    finally:
        with _assume_lock:
            _assuming -= 1
            if not _assuming:
                rename_stage.resolve_ambiguous = _resolve


class AcceptsAmbiguousRename(ManifestCommitter):
    """The rename stage's answer to an unknown outcome is 'assume it worked': no etag (or
    size) comparison, so a lost rename leaves the file missing, or another writer's file in
    its place."""

    name = "broken-ambiguous"

    def apply_commit(self, ctx: StageContext, job: JobContext, intent: Intent) -> Applied:
        with _renames_assumed_done():
            return super().apply_commit(ctx, job, intent)


class NoRollback(DirectCommitter):
    """Direct's abort deletes nothing: a failed job's files, written in place, stay."""

    name = "broken-no-rollback"

    def rollback_job(self, job: JobContext) -> None:
        pass


class AbortLeavesUploads(MagicCommitter):
    """Magic's abort removes the magic directory but aborts no upload: every upload of the
    job stays pending (invisible, billed, and named by nothing any more)."""

    name = "broken-abort-uploads"

    def rollback_job(self, job: JobContext) -> None:
        self.store.delete(job_dir(job), recursive=True)


class KeepsDeadAttemptsUploads(MagicCommitter):
    """Magic's job commit removes its directory without aborting the uploads of attempts
    that died (or were superseded) before committing."""

    name = "broken-dead-attempts"

    def remove_job_dir(self, ctx: StageContext, job: JobContext) -> str:
        self.store.delete(job_dir(job), recursive=True)
        return "deleted"


class MovesBeforeJournal(HiveCommitter):
    """Hive whose load moves the partitions while planning, before its journal (the intent
    record) is saved: a driver that dies in between leaves moved partitions that no record
    names, so recovery cannot undo them."""

    name = "broken-journal-late"

    def plan_commit(
        self, ctx: StageContext, job: JobContext, messages: Sequence[TaskCommitMessage]
    ) -> CommitPlan:
        plan = super().plan_commit(ctx, job, messages)
        journal = plan.payload.journal
        pools = self._pools()
        try:  # the load's moves, with no record (so no phase marks) beside them
            move_aside(ctx, journal, pools)
            move_in(ctx, [s for s in journal.steps if s.phase == "in"], pools)
        finally:
            pools.close()
        return plan


_unchecked_lock = threading.Lock()
_unchecked = 0


@contextmanager
def _claim_unchecked() -> Iterator[None]:
    """The claim's check before each visible step (`HeldClaim.check`: is the claim, in this
    generation, still ours?) answers yes without looking, while any such commit runs."""
    global _unchecked
    from dataferry.commit.records import hold as claim

    with _unchecked_lock:
        if not _unchecked:
            claim.HeldClaim._real_check = claim.HeldClaim.check  # type: ignore[attr-defined]
            claim.HeldClaim.check = lambda self, step, strict=True: None  # type: ignore[method-assign]
        _unchecked += 1
    try:
        yield
    finally:
        with _unchecked_lock:
            _unchecked -= 1
            if not _unchecked:
                claim.HeldClaim.check = claim.HeldClaim._real_check  # type: ignore[attr-defined]


class SkipsClaimCheck(ManifestCommitter):
    """Manifest whose job commit never checks that it still holds the destination's claim:
    a holder stopped past its lease goes on renaming and writes `_SUCCESS` after another job
    took the destination over."""

    name = "broken-unfenced"

    def commit_job(self, job: JobContext, messages: Sequence[TaskCommitMessage]) -> Any:
        with _claim_unchecked():
            return super().commit_job(job, messages)


def _spec(cls: type, config: type, summary: str, rename_based: bool) -> CommitterSpec:
    name: str = cls.name  # type: ignore[attr-defined]
    return CommitterSpec(name, __name__, cls.__name__, config.__name__, summary, {}, rename_based)


SPECS: dict[str, CommitterSpec] = {
    s.name: s
    for s in (
        _spec(DropsAFile, ManifestConfig, "manifest dropping a file from its manifest", True),
        _spec(AcceptsAmbiguousRename, ManifestConfig, "manifest: ambiguous rename done", True),
        _spec(NoRollback, DirectConfig, "direct whose abort deletes nothing", False),
        _spec(AbortLeavesUploads, MagicConfig, "magic whose abort leaves uploads", False),
        _spec(KeepsDeadAttemptsUploads, MagicConfig, "magic keeping dead attempts' uploads", False),
        _spec(MovesBeforeJournal, HiveConfig, "hive moving before its journal is saved", True),
    )
}

# each broken committer and the invariant the referee must report it under
BROKEN: dict[str, str] = {
    DropsAFile.name: inv.COMPLETE,
    AcceptsAmbiguousRename.name: inv.COMPLETE,
    NoRollback.name: inv.NOTHING_OF_FAILED,
    AbortLeavesUploads.name: inv.NO_LEFTOVERS,
    KeepsDeadAttemptsUploads.name: inv.NO_LEFTOVERS,
    MovesBeforeJournal.name: inv.NOTHING_OF_FAILED,
}


RACE_SPECS: dict[str, CommitterSpec] = {
    s.name: s
    for s in (_spec(SkipsClaimCheck, ManifestConfig, "manifest not checking its claim", True),)
}
# each and the invariants the race schedules must report it under (any of them)
RACE_BROKEN: dict[str, tuple[str, ...]] = {
    SkipsClaimCheck.name: (inv.COMPLETE, inv.EARLIER_KEPT, inv.ONE_WRITER, inv.NO_FALSE_SUCCESS),
}


def register() -> None:
    """Add the broken committers' rows to the registry of this process (a child driver's)."""
    KNOWN.update(SPECS)
    KNOWN.update(RACE_SPECS)
