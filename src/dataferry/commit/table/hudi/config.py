"""The Hudi committer's options, with Hudi's names, and the job's instant in them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ....errors import CommitError, ConfigError
from ...protocol import JobContext
from ..base import TableConfig
from .meta import KEY_FORMS
from .timeline import OPERATIONS, fields_of


@dataclass(frozen=True)
class HudiConfig(TableConfig):
    """The Hudi committer's options (with Hudi's names).

    table_name: `hoodie.table.name` ("" : the table directory's name).
    record_key: `hoodie.table.recordkey.fields`, comma-separated or a list: needed unless the
        table has one, or the write says `keyless`.
    partition_fields: `hoodie.table.partition.fields` (None: the write's partition_by).
    precombine_field: `hoodie.table.precombine.field` (optional): of two rows with one record
        key (in the input, or input and stored), the larger value wins.
    operation: `hoodie.datasource.write.operation` of `append`/`error` writes: "upsert" (the
        default, as in Hudi: a row whose record key is in the table replaces it), "insert" or
        "bulk_insert" (no key lookup: rows are added as they are, duplicates too).
    keyless: write a table without a record key (Hudi's auto-generated keys): only "insert"
        and "bulk_insert" (the default then); without it, a table with no record key is refused.
    table_version: `hoodie.table.version`: 6 (timeline layout 1). database_name: its database.
    metadata_table: `hoodie.metadata.enable` for a table dataferry makes: keep Hudi's
        metadata table (`files` and `column_stats`) beside it, as Hudi's writer does by
        default, so that Hudi's readers list files and skip them by column statistics (a
        table made without one stays without; one Hudi made is kept if it has only those).
    instant, meta_fields: set by `new_job`: the instant, the meta columns' key form (`meta`).
    """

    table_name: str = ""
    record_key: str | Sequence[str] = ()
    partition_fields: str | Sequence[str] | None = None
    precombine_field: str = ""
    table_version: int = 6
    database_name: str = ""
    operation: str = ""
    keyless: bool = False
    instant: str = ""
    meta_fields: str = ""
    metadata_table: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.table_version != 6:
            raise ConfigError(
                f"table_version {self.table_version!r} is not supported: dataferry writes "
                "Hudi tables of version 6 (timeline layout 1) only"
            )
        object.__setattr__(self, "record_key", fields_of(self.record_key))
        if self.partition_fields is not None:
            object.__setattr__(self, "partition_fields", fields_of(self.partition_fields))
        if self.instant and not (self.instant.isdigit() and len(self.instant) == 17):
            raise ConfigError(f"instant must be yyyyMMddHHmmssSSS, got {self.instant!r}")
        if self.meta_fields not in KEY_FORMS:
            raise ConfigError(f"meta_fields must be one of {KEY_FORMS}, got {self.meta_fields!r}")
        if self.operation not in ("", *OPERATIONS):
            raise ConfigError(
                f"operation must be one of {sorted(OPERATIONS)}, got {self.operation!r}"
            )
        if self.keyless and (self.operation == "upsert" or self.record_key):
            raise ConfigError(
                "keyless=True writes rows without record keys: give operation='insert' or "
                "'bulk_insert' and no record_key (an upsert looks rows up by their key)"
            )

    @property
    def write_operation(self) -> str:
        """The operation: as given, else "upsert" (Hudi's default), "insert" if keyless."""
        return self.operation or ("insert" if self.keyless else "upsert")


def instant_of(job: JobContext) -> str:
    """The job's instant time (set by `HudiCommitter.new_job`)."""
    instant = getattr(job.config, "instant", "")
    if not instant:
        raise CommitError(f"job {job.job_id}: no Hudi instant: build jobs with new_job()")
    return instant
