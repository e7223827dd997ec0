"""Hive-style insert: staging directory, parallel restartable load, partition catalog."""

from ..factory import CommitterKind, register
from .committer import HiveCommitter, HiveJobCommitResult
from .config import HiveConfig

register(
    CommitterKind(
        "hive",
        HiveConfig,
        HiveCommitter,
        "Hive-style insert: commit into .hive-staging, then a journaled parallel load",
    )
)

__all__ = ["HiveCommitter", "HiveConfig", "HiveJobCommitResult"]
