"""Apache Hudi: the committer (`committer`), its config, meta columns, rollback, table state,
timeline, types and upsert, each in a module of its own. `dataferry.commit.table.hudi` names
the committer."""

from .committer import HudiCommitter
from .config import HudiConfig

__all__ = ["HudiCommitter", "HudiConfig"]
