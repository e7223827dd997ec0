"""File systems of other libraries as stores: any fsspec file system (`store`: `memory://`,
`gs://`, `abfs://`, objects users hold) and pyarrow's, HDFS included (`arrow`)."""

from .store import PROTOCOL_CAPABILITIES, FsspecStore, filesystem_store

__all__ = ["PROTOCOL_CAPABILITIES", "FsspecStore", "filesystem_store"]
