"""Apache Iceberg: the committer (`committer`), the catalog, the data files, the partition
spec and types, each in a module of its own. `dataferry.commit.table.iceberg` names the
committer."""

from .catalog import JOB_UUID_KEY, IcebergConfig
from .committer import IcebergCommitter

__all__ = ["JOB_UUID_KEY", "IcebergCommitter", "IcebergConfig"]
