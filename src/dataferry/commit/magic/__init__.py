"""The magic committer: zero-rename commit over multipart uploads (S3A's design)."""

from ..factory import CommitterKind, register
from .committer import MagicCommitter, MagicJobCommitResult
from .config import MagicConfig

register(
    CommitterKind(
        "magic",
        MagicConfig,
        MagicCommitter,
        "magic committer: uploads left pending until job commit completes them (S3)",
    )
)

__all__ = ["MagicCommitter", "MagicConfig", "MagicJobCommitResult"]
