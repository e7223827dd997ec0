"""The manifest committer (Hadoop's MAPREDUCE-7341 design, compatible formats)."""

from .committer import ManifestCommitter
from .config import ManifestConfig
from .files import DirEntry, EntryStatus, FileEntry, TaskManifest

__all__ = [
    "DirEntry",
    "EntryStatus",
    "FileEntry",
    "ManifestCommitter",
    "ManifestConfig",
    "TaskManifest",
]
