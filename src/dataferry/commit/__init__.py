"""The commit protocol and the committers."""

from .base import Committer
from .coordinator import CommitCoordinator
from .destination import prepare_destination
from .factory import known_committers, make_committer
from .lookup import committer_for
from .protocol import JobCommitResult, JobContext, TaskAttemptContext, TaskCommitMessage
from .records.success import SuccessData, read_success

__all__ = [
    "CommitCoordinator",
    "Committer",
    "JobCommitResult",
    "JobContext",
    "SuccessData",
    "TaskAttemptContext",
    "TaskCommitMessage",
    "committer_for",
    "known_committers",
    "make_committer",
    "prepare_destination",
    "read_success",
]
