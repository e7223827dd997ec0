"""Apache Hudi: the format (`committer.HudiFormat`: the timeline, the instant's commit, the
reader) and `HudiCommitter`, the table committer bound to it with Hudi's marker layout; its
config, meta columns, rollback, table state, timeline, types and upsert in modules of their
own."""

from .committer import HudiCommitter, HudiFormat
from .config import HudiConfig

__all__ = ["HudiCommitter", "HudiConfig", "HudiFormat"]
