"""The magic committer: zero-rename commit over multipart uploads (S3A's design)."""

from .committer import MagicCommitter
from .config import MagicConfig

__all__ = ["MagicCommitter", "MagicConfig"]
