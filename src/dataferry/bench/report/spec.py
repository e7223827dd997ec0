"""What the benchmark report runs: the sweep of each section, full size or quick."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Progress = Callable[[str], None]

# a real S3-protocol server on loopback (moto, its own process), for the committers that
# need the S3 API itself
S3_SERVER = "s3 server (moto)"


@dataclass(frozen=True)
class ReportSpec:
    """What the report runs. `quick` shrinks everything to seconds (for tests)."""

    out: str = "docs/benchmarks"
    quick: bool = False
    # run only these sections; the others are taken from the report.json already in `out`
    only: tuple[str, ...] = ()

    @property
    def commit_sweep(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """store model -> committer -> file counts measured."""
        if self.quick:
            return {
                "sim:hdfs": {"v1": (40, 80), "manifest": (40, 80)},
                S3_SERVER: {"magic": (20,)},
            }
        big = (500, 2000, 5000)
        return {
            "sim:hdfs": {"v1": big, "manifest": big, "hive": big, "direct": big},
            "sim:abfs": {"v1": (250,), "manifest": big, "hive": big, "direct": big},
            "sim:s3": {"manifest": (500, 2000), "direct": big},
            # the one committer that needs a real S3 API, beside the others on the same server
            S3_SERVER: {"magic": (200, 1000), "direct": (200, 1000), "manifest": (200,)},
        }

    @property
    def plan_models(self) -> list[tuple[str, str, bool]]:
        """(committer, store model, checked?): each is predicted up to the largest size; the
        checked ones are also measured at the check size."""
        if self.quick:
            return [("manifest", "hdfs", True)]
        return [
            ("manifest", "abfs", True),
            ("manifest", "s3", True),  # rename is a copy: the bandwidth term of the model
            ("hive", "abfs", True),
            ("v1", "hdfs", True),
            # a few listings and batched deletes whatever the file count: too small to check
            ("direct", "s3", False),
        ]

    @property
    def plan_check_size(self) -> tuple[int, int, int]:
        return (400, 8, 8) if self.quick else (10_000, 100, 100)

    @property
    def plan_table_sizes(self) -> list[tuple[int, int, int]]:
        if self.quick:
            return [self.plan_check_size]
        return [self.plan_check_size, (100_000, 1_000, 1_000), (1_000_000, 10_000, 1_000)]


SECTIONS = ("commit", "plan", "markers", "shuffle", "write")
