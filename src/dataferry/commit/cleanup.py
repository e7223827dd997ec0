"""`dataferry cleanup DEST`: finish or undo what dead jobs left in a destination.

Each committer names the directories its jobs leave (`Committer.leftovers`) and recovers one
(`recover_leftover`): a job whose commit was decided (it saved its intent record) is rolled
forward to the result an uninterrupted commit gives; any other is rolled back, so nothing of it
stays visible. Only entries older than `older_than_s` are touched, so running jobs are left alone.
A commit that cannot be finished (a file it must move has vanished) is left in place and
reported, so nothing is deleted that cannot be put back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..store import Store
from .recovery import RecoveryReport, recover_destination

CleanupReport = RecoveryReport


def parse_duration(text: str) -> float:
    """'90s', '30m', '6h', '2d' or plain seconds -> seconds; ConfigError naming a bad value."""
    from ..errors import ConfigError

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    t = text.strip().lower()
    try:
        if t and t[-1] in units:
            return float(t[:-1]) * units[t[-1]]
        return float(t)
    except ValueError:
        raise ConfigError(f"not a duration: {text!r} (use e.g. 90s, 30m, 6h, 2d)") from None


def cleanup_destination(
    store: Store,
    *,
    older_than_s: float = 3600.0,
    rollback: bool = False,
    dry_run: bool = False,
) -> CleanupReport:
    return recover_destination(store, older_than_s=older_than_s, rollback=rollback, dry_run=dry_run)


@dataclass
class UploadsReport:
    pending: list = field(default_factory=list)
    aborted: list = field(default_factory=list)


def abort_uploads(
    store: Store, *, older_than_s: float = 0.0, dry_run: bool = False
) -> UploadsReport:
    """Abort multipart uploads pending under the store's root that are older than the limit."""
    now = time.time()
    report = UploadsReport(pending=store.list_uploads(""))
    for u in report.pending:
        if now - u.initiated >= older_than_s:
            if not dry_run:
                store.abort_upload(u.path, u.upload_id)
            report.aborted.append(u)
    return report
