"""Find and remove what dead jobs left in a destination (`dataferry cleanup DEST`).

- `_temporary/<job>` directories of the FileOutputCommitter and manifest committers;
- `.hive-staging_*` directories: a load with a journal is completed (or rolled back when asked),
  one without a journal never reached the table and is deleted;
- `__magic_job-*` directories of the magic committer, with every upload their attempts left
  pending (they are invisible, but billed until aborted);
- `_dataferry/markers/<job>` of the direct committer: a job that left markers and no commit
  record is rolled back (every marked file deleted).

Only entries older than `older_than_s` are touched, so jobs still running are left alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..markers.base import MARKERS_ROOT
from ..markers.rollback import rollback as rollback_markers
from ..store import Store, paths
from .direct import commit_record_path
from .hive.staging import JOURNAL, is_staging_dir
from .magic.committer import MAGIC_PREFIX, abort_magic_job_dir
from .manifest.layout import PENDING_DIR


@dataclass
class CleanupReport:
    found: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    completed_loads: list[str] = field(default_factory=list)
    rolled_back_loads: list[str] = field(default_factory=list)
    skipped_recent: list[str] = field(default_factory=list)


def _newest_mtime(store: Store, path: str) -> float:
    times = [s.mtime or 0.0 for s in store.walk(path)]
    try:
        times.append(store.stat(path).mtime or 0.0)
    except FileNotFoundError:
        pass
    return max(times) if times else 0.0


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
    catalog: str = "",
) -> CleanupReport:
    report = CleanupReport()
    now = time.time()
    candidates: list[str] = []
    if store.exists(PENDING_DIR):
        candidates += [e.path for e in store.list(PENDING_DIR)]
    if store.exists(MARKERS_ROOT):
        candidates += [e.path for e in store.list(MARKERS_ROOT)]
    if store.exists(""):
        candidates += [
            e.path
            for e in store.list("")
            if is_staging_dir(e.name) or e.name.startswith(MAGIC_PREFIX)
        ]
    for path in candidates:
        report.found.append(path)
        if now - _newest_mtime(store, path) < older_than_s:
            report.skipped_recent.append(path)
            continue
        if dry_run:
            continue
        if paths.is_under(path, MARKERS_ROOT):
            if not store.exists(commit_record_path(paths.name(path))):
                rollback_markers(store, path)
                report.rolled_back_loads.append(path)
        elif paths.name(path).startswith(MAGIC_PREFIX):
            abort_magic_job_dir(store, path)
        elif is_staging_dir(paths.name(path)) and store.exists(f"{path}/{JOURNAL}"):
            from ..store.catalog import open_catalog
            from .hive.recovery import finish_abandoned_load

            cat = open_catalog(catalog) if catalog else None
            finish_abandoned_load(store, path, rollback=rollback, catalog=cat)
            (report.rolled_back_loads if rollback else report.completed_loads).append(path)
        store.delete(path, recursive=True)
        report.removed.append(path)
    if not dry_run and store.exists(PENDING_DIR) and not store.list(PENDING_DIR):
        store.delete(PENDING_DIR)
    return report


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
