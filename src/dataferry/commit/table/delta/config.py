"""The Delta committer's options (`DeltaConfig`), with deltalake's names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ....errors import ConfigError
from ..base import TableConfig
from .commit_info import check_custom_metadata
from .predicate import parse
from .protocol import check_configuration


@dataclass(frozen=True)
class DeltaConfig(TableConfig):
    """The Delta committer's options (with deltalake's names).

    storage_options: deltalake's storage options, for a location the store does not carry
        them for (merged over those of an `s3://` store).
    name, description, configuration: the table's, when the job creates it
        (`write_deltalake(name=, description=, configuration=)`).
    schema_mode: None refuses data whose schema or partitioning differs from the table's
        (deltalake's default, also for an overwrite); "merge" adds the data's new columns to
        the table's schema; "overwrite" (with mode="overwrite" only) replaces the table's
        schema and partitioning.
    custom_metadata: kept in the commit's `commitInfo`, beside the job's own keys
        (deltalake's `CommitProperties(custom_metadata=)`).
    app_transactions: (app_id, version, last_updated ms or None) application transactions
        committed beside the job's own (`CommitProperties(app_transactions=)`).
    create_checkpoint, cleanup_expired_logs: deltalake's post-commit hooks
        (`PostCommitHookProperties`); None: deltalake's defaults.
    predicate: with mode="overwrite", replace only the partitions it selects
        (`write_deltalake(predicate=)`, on partition columns: `predicate.py`).
    """

    storage_options: dict[str, str] = field(default_factory=dict, repr=False)
    name: str = ""
    description: str = ""
    configuration: dict[str, str] = field(default_factory=dict)
    schema_mode: str | None = None
    custom_metadata: dict[str, Any] = field(default_factory=dict)
    app_transactions: tuple[tuple[str, int, int | None], ...] = ()
    create_checkpoint: bool | None = None
    cleanup_expired_logs: bool | None = None
    predicate: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.schema_mode not in (None, "merge", "overwrite"):
            raise ConfigError(
                f"schema_mode must be None, 'merge' or 'overwrite', got {self.schema_mode!r}"
            )
        check_custom_metadata(self.custom_metadata)
        check_configuration(self.configuration)
        if self.predicate:
            parse(self.predicate)
        for entry in self.app_transactions:
            if len(entry) != 3 or not isinstance(entry[0], str) or not isinstance(entry[1], int):
                raise ConfigError(
                    "app_transactions must be (app_id, version, last_updated) entries, got "
                    f"{entry!r}"
                )
