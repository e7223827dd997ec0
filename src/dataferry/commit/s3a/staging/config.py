"""Options of the staging committers, mirroring `fs.s3a.committer.*`."""

from __future__ import annotations

from dataclasses import dataclass

from ..uploads import check_upload_config


@dataclass(frozen=True)
class StagingConfig:
    """
    threads: `fs.s3a.committer.threads` (32): pendingset loading and upload completion at job
        commit.
    upload_threads: parts one task commit uploads at once (S3A bounds this with
        `fs.s3a.fast.upload.active.blocks`); memory used is about upload_threads * part_size.
    conflict_mode: `fs.s3a.committer.staging.conflict-mode` (`append`): what to do with data
        already in the destination (`directory`) or in the partitions the job writes
        (`partitioned`): `fail`, `append`, or `replace` it.
    part_size: `fs.s3a.multipart.size`: bytes per uploaded part; never below the store's
        minimum (5 MiB on S3 for every part but the last).
    staging_dir: `fs.s3a.buffer.dir`: the worker's local directory for task output (default:
        `dataferry-staging` in the system's temporary directory).
    pendingset_dir: `fs.s3a.committer.staging.tmp.path`: URL of a consistent store where task
        commits save their pendingsets (default: the job's own directory in the destination;
        S3 is consistent now).
    mark_successful_jobs: `mapreduce.fileoutputcommitter.marksuccessfuljobs` (True).
    success_data: write Hadoop's SuccessData JSON into `_SUCCESS`, as Hadoop's manifest and S3A
        committers do (False: the classic zero-byte `_SUCCESS`, which every directory reader
        accepts; polars refuses a directory holding a non-empty one).
    """

    threads: int = 32
    upload_threads: int = 8
    conflict_mode: str = "append"
    part_size: int = 8 * 1024 * 1024
    staging_dir: str | None = None
    pendingset_dir: str | None = None
    mark_successful_jobs: bool = True
    success_data: bool = False

    def __post_init__(self) -> None:
        check_upload_config(self, ("threads", "upload_threads"))
