"""The direct committer: files written in place after a write marker each, reconciled and
rolled back by the markers (Hudi's design); commit records under `_dataferry/commits/`."""

from .committer import DirectCommitter, DirectConfig, list_committed

__all__ = ["DirectCommitter", "DirectConfig", "list_committed"]
