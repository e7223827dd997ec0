"""Hive-style insert: staging directory, parallel restartable load, partition catalog."""

from .committer import HiveCommitter
from .config import HiveConfig

__all__ = ["HiveCommitter", "HiveConfig"]
