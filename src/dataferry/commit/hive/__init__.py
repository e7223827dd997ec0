"""Hive-style insert: staging directory, parallel restartable load, partition catalog."""

from .committer import HiveCommitter, HiveJobCommitResult
from .config import HiveConfig

__all__ = ["HiveCommitter", "HiveConfig", "HiveJobCommitResult"]
