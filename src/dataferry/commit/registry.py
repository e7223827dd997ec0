"""Every committer in one declarative table, loaded lazily (as fsspec's known_implementations).

A row names the committer, the module that holds it, its class and config class, its fixed
option values, and a one-line summary. Nothing is imported until a committer is asked for, so
this module imports nothing from the committers and they import nothing from it. Each committer
class carries its own hooks (finding and recovering what a dead job left, preparing a write
mode), so no other module branches on a committer's name.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from .table.registry import FORMATS as TABLE_FORMATS


@dataclass(frozen=True)
class CommitterSpec:
    name: str
    module: str
    class_name: str
    config_name: str
    summary: str
    defaults: dict[str, Any] = field(default_factory=dict)
    rename_based: bool = False  # commits by renaming: refused where rename is a copy
    # the kinds of store it keeps every promise of the commit contract on ("local", "memory",
    # and the store models "hdfs", "s3"); tests/commit/test_contract.py runs it on each
    safe_on: tuple[str, ...] = ()
    # contract promises it does not keep (the unsafe baseline's), left out of its contract run
    breaks: tuple[str, ...] = ()
    # "files": it commits a directory of files (tests/commit/test_contract.py); "table": one
    # transaction of a table format's log (tests/commit/table, read through the format's reader)
    family: str = "files"

    def committer_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.class_name)

    def config_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.config_name)


_PKG = __package__
KNOWN: dict[str, CommitterSpec] = {
    s.name: s
    for s in (
        CommitterSpec(
            "v1",
            f"{_PKG}.fileoutput",
            "FileOutputCommitter",
            "FileOutputConfig",
            "FileOutputCommitter v1: task commit renames a directory; job commit merges serially",
            {"algorithm": 1},
            rename_based=True,
            safe_on=("local", "memory", "hdfs"),
        ),
        CommitterSpec(
            "v2",
            f"{_PKG}.fileoutput",
            "FileOutputCommitter",
            "FileOutputConfig",
            "FileOutputCommitter v2 (UNSAFE baseline): task commit merges into the destination",
            {"algorithm": 2},
            rename_based=True,
            safe_on=("local", "memory", "hdfs"),
            # task commit merges into the destination: what a refused or dead job's tasks
            # committed stays visible
            breaks=("mode_error", "rollback_without_intent", "leftovers_removed", "links_refused"),
        ),
        CommitterSpec(
            "manifest",
            f"{_PKG}.manifest.committer",
            "ManifestCommitter",
            "ManifestConfig",
            "manifest committer: task commit saves a manifest; job commit renames files in parallel",
            rename_based=True,
            safe_on=("local", "memory", "hdfs"),
        ),
        CommitterSpec(
            "magic",
            f"{_PKG}.s3a.magic.committer",
            "MagicCommitter",
            "MagicConfig",
            "magic committer: uploads left pending until job commit completes them (S3)",
            safe_on=("s3",),
        ),
        CommitterSpec(
            "magic-gcs",
            f"{_PKG}.s3a.magic.gcs",
            "GcsMagicCommitter",
            "MagicConfig",
            "magic committer on GCS: resumable upload sessions left open until job commit "
            "finalizes them",
            safe_on=("gcs",),
        ),
        CommitterSpec(
            "blocklist",
            f"{_PKG}.blocklist.committer",
            "BlockListCommitter",
            "BlockListConfig",
            "block-list committer: blocks staged under the final name until job commit puts "
            "each file's block list (Azure Blob)",
            safe_on=("abfs",),
        ),
        CommitterSpec(
            "directory",
            f"{_PKG}.s3a.staging.committer",
            "DirectoryStagingCommitter",
            "StagingConfig",
            "S3A staging committer: tasks stage on local disk, upload at task commit; "
            "conflict mode over the whole destination",
            safe_on=("s3",),
        ),
        CommitterSpec(
            "partitioned",
            f"{_PKG}.s3a.staging.committer",
            "PartitionedStagingCommitter",
            "StagingConfig",
            "S3A staging committer whose conflict mode covers only the partitions written",
            safe_on=("s3",),
        ),
        CommitterSpec(
            "hive",
            f"{_PKG}.hive.committer",
            "HiveCommitter",
            "HiveConfig",
            "Hive-style insert: commit into .hive-staging, then a journaled parallel load",
            rename_based=True,
            safe_on=("local", "memory", "hdfs"),
        ),
        CommitterSpec(
            "direct",
            f"{_PKG}.direct.committer",
            "DirectCommitter",
            "DirectConfig",
            "direct committer: files written in place, reconciled and rolled back by markers",
            safe_on=("local", "memory", "hdfs", "s3"),
            # an aborted attempt's files stay in place (marked) until the job commit or abort
            breaks=("abort_task_removes_output",),
        ),
        # the table committers: one per row of the table-format registry
        *(
            CommitterSpec(
                f.name,
                f.module,
                f.committer_name,
                f.config_name,
                f.summary,
                safe_on=f.safe_on,
                family="table",
            )
            for f in TABLE_FORMATS.values()
        ),
    )
}


def spec(name: str) -> CommitterSpec | None:
    return KNOWN.get(name)


def committer_classes() -> list[type]:
    """Each distinct committer class once (v1 and v2 share one), for hooks such as cleanup's."""
    seen: dict[type, None] = {}
    for s in KNOWN.values():
        seen.setdefault(s.committer_class(), None)
    return list(seen)
