"""The reads a shuffle's reducers really make, from the counters the reader keeps
(`shuffle/reader.py`): each merged partition or chunk read, each block a stub names (read
from its map output: a merge by reference moves no bytes, so each of its blocks is still a
read of its own), and each original block fetched from a map output.

A push shuffle on one host merges every block by reference: its reducers read one merged
partition of stubs and then every block from the map outputs, more reads than a pull, not
fewer. Counting only the merged partitions (as `bench shuffle` once did) reported 100x fewer
reads than pull where there were none fewer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

SOURCES = ("merged", "ref", "original")


@dataclass(frozen=True)
class ReduceReads:
    """The reduce side's reads by where they went, over all `reduces` of one shuffle."""

    reduces: int
    merged_reads: int = 0  # merged partitions or chunks (stubs or blocks), and their metadata
    merged_bytes: int = 0
    merged_blocks: int = 0  # blocks in merged chunks, by reference or not
    ref_reads: int = 0  # blocks a stub names, read from their map outputs
    ref_bytes: int = 0
    original_reads: int = 0  # blocks fetched from their map outputs (not merged, or pull)
    original_bytes: int = 0

    @classmethod
    def from_counters(cls, counters: Mapping[str, Any], reduces: int) -> ReduceReads:
        """From a reduce stage's summed counters (`reduce_<source>_reads` and the like)."""

        def get(name: str) -> int:
            return int(counters.get(name, 0) or 0)

        return cls(
            reduces,
            get("reduce_merged_reads"),
            get("reduce_merged_read_bytes"),
            get("reduce_merged_blocks"),
            get("reduce_ref_reads"),
            get("reduce_ref_read_bytes"),
            get("reduce_original_reads"),
            get("reduce_original_read_bytes"),
        )

    @property
    def reads(self) -> int:
        """Every read: a merged read holding stubs is one, and each block it names another."""
        return self.merged_reads + self.ref_reads + self.original_reads

    @property
    def bytes(self) -> int:
        return self.merged_bytes + self.ref_bytes + self.original_bytes

    @property
    def merged_in_place(self) -> int:
        """Blocks read as bytes of a merged chunk (merged truly, not by reference)."""
        return max(0, self.merged_blocks - self.ref_reads)

    @property
    def per_reduce(self) -> float:
        return self.reads / self.reduces if self.reduces else 0.0

    @property
    def avg_read_bytes(self) -> int | None:
        return round(self.bytes / self.reads) if self.reads else None

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "reads": self.reads,
            "bytes": self.bytes,
            "merged_in_place": self.merged_in_place,
            "per_reduce": round(self.per_reduce, 1),
            "avg_read_bytes": self.avg_read_bytes,
        }


def read_reduction(pull: ReduceReads, push: ReduceReads) -> float | None:
    """How many times fewer reads the push shuffle's reducers made than the pull's (below 1:
    more), from every read each made; None when either made none."""
    if not pull.reads or not push.reads:
        return None
    return round(pull.reads / push.reads, 2)
