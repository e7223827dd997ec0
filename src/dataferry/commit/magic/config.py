"""Options of the magic committer, mirroring `fs.s3a.committer.*`."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ..uploads import CONFLICT_MODES, MIN_PART


@dataclass(frozen=True)
class MagicConfig:
    """
    threads: `fs.s3a.committer.threads` (32): pendingset loading and upload completion.
    conflict_mode: `fs.s3a.committer.staging.conflict-mode` (`append`): what to do with data
        already in the partitions this job writes: `fail`, `append`, or `replace` them.
    part_size: bytes per uploaded part (S3 needs at least 5 MiB for all parts but the last).
    mark_successful_jobs: `mapreduce.fileoutputcommitter.marksuccessfuljobs` (True).
    """

    threads: int = 32
    conflict_mode: str = "append"
    part_size: int = 8 * 1024 * 1024
    mark_successful_jobs: bool = True

    def __post_init__(self) -> None:
        if self.conflict_mode not in CONFLICT_MODES:
            raise ConfigError(
                f"unknown conflict_mode {self.conflict_mode!r}; use one of {', '.join(CONFLICT_MODES)}"
            )
        if self.part_size < MIN_PART:
            raise ConfigError(f"part_size must be at least {MIN_PART} bytes, got {self.part_size}")
        if self.threads < 1:
            raise ConfigError(f"threads must be >= 1, got {self.threads}")
