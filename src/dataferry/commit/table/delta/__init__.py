"""Delta Lake: the committer (`committer`), the log's actions, commit info, checks, predicate
and types, each in a module of its own. `dataferry.commit.table.delta` names the committer."""

from .committer import DeltaCommitter, DeltaConfig

__all__ = ["DeltaCommitter", "DeltaConfig"]
