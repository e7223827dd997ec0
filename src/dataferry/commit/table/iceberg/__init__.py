"""Apache Iceberg: the format (`committer.IcebergFormat`: the catalog commit, the reader), the
catalog, the data files, the partition spec and types in modules of their own, and
`IcebergCommitter`, the one table committer bound to the format."""

from ..base import TableCommitter
from .catalog import JOB_UUID_KEY, IcebergConfig
from .committer import IcebergFormat


class IcebergCommitter(TableCommitter):
    """The table committer holding an `IcebergFormat` (the binding: no hook of its own)."""

    format_class = IcebergFormat


__all__ = ["JOB_UUID_KEY", "IcebergCommitter", "IcebergConfig", "IcebergFormat"]
