"""What a Delta job's transaction says about itself in the log, as deltalake's own writes say
it: the commit's `commitInfo` (operationMetrics with deltalake's names, clientVersion naming
dataferry, the caller's custom metadata beside the job's own keys), the caller's application
transactions beside the job's, and deltalake's post-commit hooks; and the job's identity in
the table: its application id, the save mode of a transaction that creates the table, what
counts as a conflict, and the version its transaction made.

delta-rs generates `operation`, `operationParameters` and `engineInfo` itself (its Python
transaction API refuses them as custom metadata), so those say what delta-rs' transaction
did; everything else is set here.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ....errors import ConfigError
from ...protocol import JobContext

# commitInfo keys delta-rs or this module set: a caller's custom metadata may not name them
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
JOB_KEYS = ("dataferry.job_id", "dataferry.job_uuid")


def check_custom_metadata(metadata: Mapping[str, Any]) -> None:
    """Refuse, when the job is configured, custom metadata the commit could not carry (a key
    delta-rs or dataferry sets, a value JSON cannot hold): at commit time it would be an
    error after the job's commit was decided."""
    for key, value in metadata.items():
        if not isinstance(key, str) or key in RESERVED_KEYS or key.startswith("dataferry."):
            raise ConfigError(
                f"custom_metadata key {key!r} is set by delta-rs or dataferry in each commit; "
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


def client_version() -> str:
    """`dataferry-<version>` (the installed distribution's; "dataferry" from a source tree)."""
    import importlib.metadata

    try:
        return f"dataferry-{importlib.metadata.version('dataferry')}"
    except importlib.metadata.PackageNotFoundError:
        return "dataferry"


def commit_properties(
    config: Any, job: JobContext, appid: str, metrics: Metrics, retries: int
) -> Any:
    """deltalake's CommitProperties for the job's transaction."""
    from deltalake.transaction import CommitProperties, Transaction

    now = int(time.time() * 1000)
    custom = {
        **config.custom_metadata,
        "dataferry.job_id": str(job.job_id),
        "dataferry.job_uuid": job.job_uuid,
        "operationMetrics": metrics.to_json(job),
        "clientVersion": client_version(),
    }
    theirs = [
        Transaction(a, int(v), int(u) if u is not None else now)
        for a, v, u in config.app_transactions
    ]
    return CommitProperties(
        custom_metadata=custom,
        max_commit_retries=retries,
        app_transactions=[Transaction(appid, 1, now), *theirs],
    )


def post_commit_properties(config: Any) -> Any:
    """deltalake's PostCommitHookProperties, or None for deltalake's defaults."""
    if config.create_checkpoint is None and config.cleanup_expired_logs is None:
        return None
    from deltalake import PostCommitHookProperties

    return PostCommitHookProperties(
        create_checkpoint=True if config.create_checkpoint is None else config.create_checkpoint,
        cleanup_expired_logs=config.cleanup_expired_logs,
    )


# a job's mode -> deltalake's save mode when its transaction creates the table (the log
# then says ErrorIfExists/Append/Overwrite, as deltalake's own writes do)
CREATE_MODES = {
    "error": "error",
    "append": "append",
    "overwrite": "overwrite",
    "overwrite-partitions": "overwrite",
}


def app_id(job: JobContext) -> str:
    """The job's application id in the table's `txn` actions."""
    return f"dataferry-{job.job_uuid}"


def is_conflict(error: BaseException) -> bool:
    """A commit another writer's commit made invalid (tried again, for an append)."""
    from deltalake.exceptions import CommitFailedError

    return isinstance(error, CommitFailedError)


def version_of(dt: Any, appid: str) -> int:
    """The table version whose commit carries the job's app id (the latest commit's if the
    history does not say)."""
    for entry in dt.history(limit=50):
        if entry.get("dataferry.job_uuid") and appid.endswith(entry["dataferry.job_uuid"]):
            return int(entry.get("version", dt.version()))
    return dt.version()
