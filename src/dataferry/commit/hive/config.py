"""Options of the Hive-style insert."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError

MODES = ("append", "overwrite", "overwrite-table")


@dataclass(frozen=True)
class HiveConfig:
    """
    mode: `append` (INSERT INTO: clashing names get `_copy_N`), `overwrite` (INSERT OVERWRITE:
        the partitions this job wrote are replaced, others untouched), `overwrite-table`.
    inner: the committer tasks commit through into the staging directory (`manifest` or `v1`).
    io_threads: the inner committer's job-commit threads (manifest).
    move_threads: `hive.mv.files.thread` (15): file moves in parallel.
    load_partition_threads: `hive.load.dynamic.partitions.thread` (15): partitions (directory
        renames) in parallel.
    catalog: location of the partition catalog (a SQLite file path); "" for none.
    table: the table's name in the catalog; "" uses the last component of its location.
    mark_successful_jobs: write `_SUCCESS` in the table after the load.
    success_data: write Hadoop's SuccessData JSON into `_SUCCESS`, as Hadoop's manifest and S3A
        committers do (False: the classic zero-byte `_SUCCESS`, which every directory reader
        accepts; polars refuses a directory holding a non-empty one).
    """

    mode: str = "append"
    inner: str = "manifest"
    io_threads: int = 32
    move_threads: int = 15
    load_partition_threads: int = 15
    catalog: str = ""
    table: str = ""
    mark_successful_jobs: bool = True
    success_data: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"unknown hive mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.inner not in ("manifest", "v1"):
            raise ConfigError(f"inner committer must be 'manifest' or 'v1', got {self.inner!r}")
        for name in ("io_threads", "move_threads", "load_partition_threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
