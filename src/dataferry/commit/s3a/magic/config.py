"""Options of the magic committer, mirroring `fs.s3a.committer.*`."""

from __future__ import annotations

from dataclasses import dataclass

from ..uploads import check_upload_config


@dataclass(frozen=True)
class MagicConfig:
    """
    threads: `fs.s3a.committer.threads` (32): pendingset loading and upload completion.
    conflict_mode: `fs.s3a.committer.staging.conflict-mode` (`append`): what to do with data
        already in the partitions this job writes: `fail`, `append`, or `replace` them.
    part_size: bytes per uploaded part (S3 needs at least 5 MiB for all parts but the last).
    mark_successful_jobs: `mapreduce.fileoutputcommitter.marksuccessfuljobs` (True).
    success_data: write Hadoop's SuccessData JSON into `_SUCCESS`, as Hadoop's manifest and S3A
        committers do (False: the classic zero-byte `_SUCCESS`, which every directory reader
        accepts; polars refuses a directory holding a non-empty one).
    """

    threads: int = 32
    conflict_mode: str = "append"
    part_size: int = 8 * 1024 * 1024
    mark_successful_jobs: bool = True
    success_data: bool = False

    def __post_init__(self) -> None:
        check_upload_config(self, ("threads",))
