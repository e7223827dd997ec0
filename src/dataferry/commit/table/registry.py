"""Every table format in one declarative table, loaded lazily (as commit/registry.py).

A row names the format (its committer's name), where its package is, its committer and config
classes, what it needs installed, and the little the table contract suite must know to write
to it. The committer registry, the benchmarks, the CLI and the contract suite
(tests/commit/table/test_contract.py) find formats here, so nothing outside a format's own
package branches on a format's name: a format joins with one package and one row.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class TableFormatSpec:
    name: str  # the committer's name: make_committer("delta", ...)
    label: str  # as its users name it: "Delta Lake"
    module: str  # the format's package: its committer, config and `TableFormat`
    committer_name: str
    config_name: str
    summary: str
    # Python modules the committer needs to commit, and to read the table back (read_rows)
    needs: tuple[str, ...] = ()
    reader_needs: tuple[str, ...] = ()
    # the kinds of store it keeps the table contract on (as CommitterSpec.safe_on)
    safe_on: tuple[str, ...] = ("local", "s3")
    # the option naming the record key, for a format whose writes must give one (Hudi's
    # `record_key`); "" for a format without keys
    key_option: str = ""
    # options under which a keyed write adds its rows as they are, duplicates too, instead of
    # merging them by key (Hudi's operation="insert"): where the contract suite checks that
    # no task's rows are committed twice, a merge by key would hide the duplicate
    insert_options: tuple[tuple[str, str], ...] = ()

    def committer_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.committer_name)

    def config_class(self) -> type:
        return getattr(importlib.import_module(self.module), self.config_name)

    def key_options(self, *columns: str) -> dict[str, list[str]]:
        """The options a write keyed by `columns` gives ({} for a format without keys)."""
        return {self.key_option: list(columns)} if self.key_option and columns else {}


_PKG = __package__
FORMATS: dict[str, TableFormatSpec] = {
    s.name: s
    for s in (
        TableFormatSpec(
            "delta",
            "Delta Lake",
            f"{_PKG}.delta",
            "DeltaCommitter",
            "DeltaConfig",
            "Delta Lake table: files in place, reconciled by markers, one Delta transaction",
            needs=("deltalake",),
            reader_needs=("deltalake",),
        ),
        TableFormatSpec(
            "iceberg",
            "Apache Iceberg",
            f"{_PKG}.iceberg",
            "IcebergCommitter",
            "IcebergConfig",
            "Apache Iceberg table: files in place, reconciled by markers, one catalog commit",
            needs=("pyiceberg", "sqlalchemy"),
            reader_needs=("pyiceberg",),
        ),
        TableFormatSpec(
            "hudi",
            "Apache Hudi",
            f"{_PKG}.hudi",
            "HudiCommitter",
            "HudiConfig",
            "Apache Hudi copy-on-write table: files in place after Hudi markers, one instant",
            reader_needs=("hudi",),
            key_option="record_key",
            insert_options=(("operation", "insert"),),
        ),
    )
}


def table_format(name: str) -> TableFormatSpec | None:
    """The row of table format `name` (None: no such format)."""
    return FORMATS.get(name)


def format_names() -> tuple[str, ...]:
    """Every table format's name, in the table's order."""
    return tuple(FORMATS)
