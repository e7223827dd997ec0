"""Writing data sets: partitioning, file formats, and `write_dataset`."""

from .write import WriteResult, write_dataset

__all__ = ["WriteResult", "write_dataset"]
