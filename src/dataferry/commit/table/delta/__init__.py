"""Delta Lake: the format (`committer.DeltaFormat`: the log, the transaction, the reader), the
log's actions, commit info, checks, predicate and types in modules of their own, and
`DeltaCommitter`, the one table committer bound to the format."""

from ..base import TableCommitter
from .committer import DeltaFormat
from .config import DeltaConfig


class DeltaCommitter(TableCommitter):
    """The table committer holding a `DeltaFormat` (the binding: no hook of its own)."""

    format_class = DeltaFormat


__all__ = ["DeltaCommitter", "DeltaConfig", "DeltaFormat"]
