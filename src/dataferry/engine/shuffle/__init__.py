"""Shuffle stages on dataferry's engines: the Arrow block codec (`codec`), the map and reduce
tasks any engine runs (`tasks`), and the embedded engine's shuffle (`local.LocalShuffle`)."""

from .codec import as_table, decode_blocks, encode_block, partition_ids, split_table
from .local import LocalShuffle, LocalShuffleConfig, ShuffleRun
from .tasks import MapResult, MapTask, ReduceResult, TableSource, run_map_task, run_reduce_task

__all__ = [
    "LocalShuffle",
    "LocalShuffleConfig",
    "MapResult",
    "MapTask",
    "ReduceResult",
    "ShuffleRun",
    "TableSource",
    "as_table",
    "decode_blocks",
    "encode_block",
    "partition_ids",
    "run_map_task",
    "run_reduce_task",
    "split_table",
]
