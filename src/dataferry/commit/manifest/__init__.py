"""The manifest committer (Hadoop's MAPREDUCE-7341 design, compatible formats)."""

from ..factory import CommitterKind, register
from .committer import ManifestCommitter, ManifestJobCommitResult
from .config import ManifestConfig
from .files import DirEntry, EntryStatus, FileEntry, TaskManifest

register(
    CommitterKind(
        "manifest",
        ManifestConfig,
        ManifestCommitter,
        "manifest committer: task commit saves a manifest; job commit renames files in parallel",
    )
)

__all__ = [
    "DirEntry",
    "EntryStatus",
    "FileEntry",
    "ManifestCommitter",
    "ManifestConfig",
    "ManifestJobCommitResult",
    "TaskManifest",
]
