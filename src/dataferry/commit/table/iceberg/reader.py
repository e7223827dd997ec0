"""What the Iceberg committer reads of its table for the referee and cleanup: the live files,
the rows, the files some snapshot references, and how many snapshots name a job."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from .catalog import jobs_of


class IcebergReader:
    """The reader half of `IcebergFormat`, a mixin: `table()` (the table as it is now, None
    if there is none) and `relative()` (a data file's path in the store) are the format's."""

    table: Any
    relative: Any

    def live_files(self) -> list[str]:
        tbl = self.table()
        if tbl is None or tbl.current_snapshot() is None:
            return []
        return sorted(self.relative(t.file.file_path) for t in tbl.scan().plan_files())

    def read_rows(self) -> pa.Table | None:
        """The current snapshot's rows by a pyiceberg scan (None if there is no table)."""
        tbl = self.table()
        return None if tbl is None else tbl.scan().to_arrow()

    def referenced_files(self) -> set[str]:
        """The data files some snapshot of the table references (its manifests' live
        entries, each manifest read once), as paths in the store."""
        from pyiceberg.manifest import ManifestContent

        tbl = self.table()
        if tbl is None:
            return set()
        found: set[str] = set()
        seen: set[str] = set()
        for snapshot in tbl.metadata.snapshots:
            for manifest in snapshot.manifests(tbl.io):
                if manifest.manifest_path in seen or manifest.content != ManifestContent.DATA:
                    continue
                seen.add(manifest.manifest_path)
                for entry in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True):
                    found.add(self.relative(entry.data_file.file_path))
        return found

    def landed(self, job_uuid: str) -> int:
        """How many snapshots name the job's uuid in their summary (its own, or a group's
        that carried it): each commit of a job is one snapshot (an overwrite too), so more
        than one means the job was applied more than once."""
        tbl = self.table()
        if tbl is None:
            return 0
        return sum(1 for s in tbl.metadata.snapshots if job_uuid in jobs_of(s.summary))
