"""What a Delta job's transaction says about itself in the log, as deltalake's own writes say
it: the commit's `commitInfo` (operation WRITE; operationParameters mode, partitionBy and a
replace where's predicate; operationMetrics with deltalake's names; engineInfo and
clientVersion naming dataferry; the caller's custom metadata beside the job's own keys), the
job's and the caller's application transactions (`txn`), and deltalake's post-commit hooks;
and the job's identity in the table: its application id, what counts as a conflict, and the
version its transaction made.
"""

from __future__ import annotations

import calendar
import functools
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ....errors import ConfigError
from ...protocol import JobContext
from .entry import VersionTaken

log = logging.getLogger("dataferry.commit")

# commitInfo keys Delta writers or this module set: a caller's custom metadata may not name them
RESERVED_KEYS = frozenset(
    {
        "timestamp",
        "operation",
        "operationParameters",
        "operationMetrics",
        "engineInfo",
        "clientVersion",
        "userId",
        "userName",
        "readVersion",
        "isolationLevel",
        "isBlindAppend",
        "txnId",
    }
)


def check_custom_metadata(metadata: Mapping[str, Any]) -> None:
    """Refuse, when the job is configured, custom metadata the commit could not carry (a key
    the commit sets itself, a value JSON cannot hold): at commit time it would be an error
    after the job's commit was decided."""
    for key, value in metadata.items():
        if not isinstance(key, str) or key in RESERVED_KEYS or key.startswith("dataferry."):
            raise ConfigError(
                f"custom_metadata key {key!r} is set by dataferry in each commit (as delta-rs "
                "sets it in its own); "
                "choose another name"
            )
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"custom_metadata[{key!r}] is a {type(value).__name__}, which a Delta log "
                "cannot hold: give a string, number, bool, list or dict"
            ) from None


@dataclass(frozen=True)
class Metrics:
    """The job's transaction in deltalake's `operationMetrics` words."""

    added_files: int
    removed_files: int
    partitions: int
    added_rows: int
    retries: int = 0

    def to_json(self, job: JobContext) -> dict[str, int]:
        return {
            "num_added_files": self.added_files,
            "num_removed_files": self.removed_files,
            "num_partitions": self.partitions,
            "num_added_rows": self.added_rows,
            "execution_time_ms": execution_time_ms(job),
            "num_retries": self.retries,
        }


def execution_time_ms(job: JobContext) -> int:
    """Milliseconds since the job began (its id carries its UTC start to the second)."""
    try:
        started = calendar.timegm(time.strptime(job.job_id.tracker[:14], "%Y%m%d%H%M%S"))
    except (AttributeError, ValueError):
        return 0
    return max(0, int((time.time() - started) * 1000))


@functools.cache
def client_version() -> str:
    """`dataferry-<version>`: the package's own `__version__` (the distribution's, pyproject's
    static version). Read from the package already loaded, not through `importlib.metadata`,
    whose import alone costs about 40 ms of CPU in each process's first commit."""
    version = getattr(sys.modules.get("dataferry"), "__version__", None)
    return f"dataferry-{version}" if version else "dataferry"


def engine_info() -> str:
    """`dataferry/<version>`: the engine that made the commit."""
    return client_version().replace("-", "/", 1)


# a job's mode -> the save mode deltalake's log names (`operationParameters.mode`)
SAVE_MODES = {
    "error": "ErrorIfExists",
    "append": "Append",
    "overwrite": "Overwrite",
    "overwrite-partitions": "Overwrite",
}


def commit_info(
    config: Any,
    job: JobContext,
    mode: str,
    partition_by: Sequence[str],
    predicate: str,
    metrics: Metrics,
    now_ms: int,
    carried: Sequence[Any] = (),
) -> dict[str, Any]:
    """The `commitInfo` action, in deltalake's words: operation WRITE, its parameters (the
    save mode, the partition columns as a JSON list, a replace where's predicate), the
    metrics, the engine; the caller's custom metadata and the job's keys beside them; in a
    group's entry, the job uuids of the other requests it carries (`dataferry.group`)."""
    parameters: dict[str, str] = {"mode": SAVE_MODES[mode]}
    if partition_by:
        parameters["partitionBy"] = json.dumps(list(partition_by), separators=(",", ":"))
    if predicate:
        parameters["predicate"] = predicate
    return {
        "commitInfo": {
            "timestamp": now_ms,
            "operation": "WRITE",
            "operationParameters": parameters,
            "engineInfo": engine_info(),
            "operationMetrics": metrics.to_json(job),
            "clientVersion": client_version(),
            **config.custom_metadata,
            "dataferry.job_id": str(job.job_id),
            "dataferry.job_uuid": job.job_uuid,
            **({"dataferry.group": [r.job_uuid for r in carried]} if carried else {}),
        }
    }


def jobs_of(entry: Mapping[str, Any]) -> set[str]:
    """The job uuids whose transactions a version's commitInfo names (a group's too)."""
    group = entry.get("dataferry.group")
    jobs = set(group) if isinstance(group, list) else set()
    return jobs | ({entry["dataferry.job_uuid"]} if entry.get("dataferry.job_uuid") else set())


def transactions(config: Any, appid: str, now_ms: int) -> list[dict[str, Any]]:
    """The `txn` actions: the job's own (version 1) and the caller's
    (`CommitProperties(app_transactions=)`)."""
    entries = [(appid, 1, now_ms)]
    entries += [
        (a, int(v), int(u) if u is not None else now_ms) for a, v, u in config.app_transactions
    ]
    return [{"txn": {"appId": a, "version": v, "lastUpdated": u}} for a, v, u in entries]


def checkpoint_due(configuration: Mapping[str, str], version: int, config: Any) -> bool:
    """Whether deltalake's post-commit hook would checkpoint this version: it closes a
    `delta.checkpointInterval` (100 by default; versions 0..interval-1 make the first), unless
    the job said `create_checkpoint=False` (`PostCommitHookProperties`)."""
    if config.create_checkpoint is False:
        return False
    try:
        interval = max(1, int(configuration.get("delta.checkpointInterval", 100)))
    except ValueError:
        interval = 100
    return (version + 1) % interval == 0


def after_commit(dt: Any, version: int, config: Any) -> None:
    """deltalake's post-commit hooks, run by deltalake on the committed version: its
    checkpoint, then the expired log entries removed (`cleanup_expired_logs`, by default the
    table's `delta.enableExpiredLogCleanup`). The commit stands whatever they do: a failure
    is logged, a later commit's hook makes the next checkpoint."""
    try:
        cleanup = config.cleanup_expired_logs
        if cleanup is None:
            conf = dict(dt.metadata().configuration)
            cleanup = str(conf.get("delta.enableExpiredLogCleanup", "true")).lower() == "true"
        dt.create_checkpoint()
        if cleanup:
            dt.cleanup_metadata()
    except Exception as e:  # the commit is in the table: only the hook failed
        log.warning("Delta table version %s: post-commit hook failed: %s", version, e)


def after_version(location: tuple[str, dict[str, str]], version: int, config: Any) -> None:
    """deltalake's post-commit hooks on the version just committed of the table at
    `location` (its uri and storage options); the commit stands whatever they do."""
    from deltalake import DeltaTable

    uri, options = location
    try:
        dt = DeltaTable(uri, version=version, storage_options=options or None)
    except Exception as e:
        log.warning("Delta table %s: no checkpoint after version %s: %s", uri, version, e)
        return
    after_commit(dt, version, config)


def app_id(job: JobContext) -> str:
    """The job's application id in the table's `txn` actions."""
    return app_id_of(job.job_uuid)


def app_id_of(job_uuid: str) -> str:
    """The application id of the job with this uuid (every one starts `dataferry-`)."""
    return f"dataferry-{job_uuid}"


def is_conflict(error: BaseException) -> bool:
    """A commit another writer's commit made invalid (tried again, for an append)."""
    return isinstance(error, VersionTaken)


def version_of(dt: Any, appid: str) -> int:
    """The table version whose commit carries the job's app id (the latest commit's if the
    history does not say)."""
    for entry in dt.history(limit=50):
        if any(appid.endswith(j) for j in jobs_of(entry)):
            return int(entry.get("version", dt.version()))
    return dt.version()
