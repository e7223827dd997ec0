"""Options of the manifest committer, mirroring `mapreduce.manifest.committer.*`."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError


@dataclass(frozen=True)
class ManifestConfig:
    """
    io_threads: `mapreduce.manifest.committer.io.threads` (32): the one pool for manifest
        loading, directory creation, renames, validation and cleanup.
    validate_output: `mapreduce.manifest.committer.validate.output` (False): stat every
        committed file and compare its size (and etag where the store keeps etags on rename).
        Runs before `_SUCCESS` is written, so a failed validation never leaves a `_SUCCESS`.
    delete_target_files: `mapreduce.manifest.committer.delete.target.files` (False): delete a
        file already at a rename's destination (skipped for directories this job created).
    cleanup_parallel_delete: `mapreduce.manifest.committer.cleanup.parallel.delete` (True):
        delete task attempt directories in parallel before the job directory (not where the
        store deletes a tree in one request, `tree_delete`: HDFS deletes the job directory whole).
    cleanup_skipped: `mapreduce.fileoutputcommitter.cleanup.skipped` (False).
    cleanup_failures_ignored: `mapreduce.fileoutputcommitter.cleanup-failures.ignored` (False).
    mark_successful_jobs: `mapreduce.fileoutputcommitter.marksuccessfuljobs` (True).
    success_data: write Hadoop's SuccessData JSON into `_SUCCESS`, as Hadoop's manifest and S3A
        committers do (False: the classic zero-byte `_SUCCESS`, which every directory reader
        accepts; polars refuses a directory holding a non-empty one).
    task_scan_threads: threads a task commit lists its attempt directory with, one level of
        directories at a time (Hadoop walks it on one thread). Used only when listing waits
        on the store rather than on the CPU.
    summary_report_dir: `mapreduce.manifest.committer.summary.report.directory` (""): a URL or
        path where `summary-<jobUUID>.json` is saved after every commit, failed ones included.
    diagnostics_manifest_dir: `mapreduce.manifest.committer.diagnostics.manifest.directory`
        (""): a destination-relative directory that receives the job's manifests after commit.
    manifest_save_attempts: `mapreduce.manifest.committer.manifest.save.attempts` (5).
    save_retry_sleep_s: sleep between manifest save attempts, growing linearly (Hadoop: 0.5 s).
    rename_attempts: how many times one file rename is tried when the store throttles or its
        outcome is unknown (each unknown outcome is first resolved by etag).
    io_rate_limit: store operations per second for renames, 0 for none (the role of
        `fs.azure.io.rate.limit`); time spent waiting is `store_io_rate_limited`.
    """

    io_threads: int = 32
    validate_output: bool = False
    delete_target_files: bool = False
    cleanup_parallel_delete: bool = True
    cleanup_skipped: bool = False
    cleanup_failures_ignored: bool = False
    mark_successful_jobs: bool = True
    success_data: bool = False
    task_scan_threads: int = 8
    summary_report_dir: str = ""
    diagnostics_manifest_dir: str = ""
    manifest_save_attempts: int = 5
    save_retry_sleep_s: float = 0.5
    rename_attempts: int = 3
    io_rate_limit: float = 0.0

    def __post_init__(self) -> None:
        if self.io_threads < 1:
            raise ConfigError(f"io_threads must be >= 1, got {self.io_threads}")
        if self.task_scan_threads < 1:
            raise ConfigError(f"task_scan_threads must be >= 1, got {self.task_scan_threads}")
        if self.manifest_save_attempts < 1:
            raise ConfigError(
                f"manifest_save_attempts must be >= 1, got {self.manifest_save_attempts}"
            )
        if self.rename_attempts < 1:
            raise ConfigError(f"rename_attempts must be >= 1, got {self.rename_attempts}")
        if self.io_rate_limit < 0:
            raise ConfigError(f"io_rate_limit must be >= 0, got {self.io_rate_limit}")
