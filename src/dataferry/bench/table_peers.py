"""Each table format's peers in `dataferry bench table`, as one small table (`PEERS`): the
options dataferry's committer takes for a table at a destination, the format's own Python
writer (deltalake's `write_deltalake`, pyiceberg's `Table.append`; Hudi has none), and the
readers that read the format here (deltalake and polars; pyiceberg and polars; hudi-rs).

The bench looks a format up in this table rather than branching on its name; a new format
joins with one row.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .writers import delta_rows

NAMESPACE = "bench"
# pyiceberg's switch (its config key, read from the environment) to write nanosecond
# timestamps as microseconds rather than refuse them: the behaviour dataferry's type policy
# for Iceberg follows
DOWNCAST_ENV = "PYICEBERG_DOWNCAST_NS_TIMESTAMP_TO_US_ON_WRITE"


@dataclass(frozen=True)
class Setting:
    """What a bench run gives every writer of a table: its catalog (Iceberg), partition
    columns, and record key and table name (Hudi)."""

    catalog: dict[str, str]
    partition_by: tuple[str, ...]
    record_key: str
    table_name: str


@dataclass(frozen=True)
class Reader:
    """A reader of the format: `read(dest, setting)` is the table's current rows (an Iceberg
    table through the run's catalog, as its users read it)."""

    name: str
    read: Callable[[str, Setting], pa.Table]


@dataclass(frozen=True)
class FormatPeers:
    """One format's row: dataferry's committer options, the format's own writer, its readers
    (the first is the format's own library: it reads the own writer's table as the expected
    values)."""

    format: str  # its row in the table-format registry (commit/table/registry.py)
    options: Callable[[str, Setting], dict[str, Any]]  # dest -> committer_options
    readers: tuple[Reader, ...]
    rows: Callable[[str], int]  # dest -> the table's rows, by the format's own library
    writer: str | None = None  # the format's own Python writer, if any
    write: Callable[[pa.Table, str, Setting], None] | None = None
    writer_needs: tuple[str, ...] = ()
    no_writer: str = ""  # why there is none
    # (dest, setting) -> the commits in the table, through the format's own library
    versions: Callable[[str, Setting], int] | None = None
    setup: Callable[[Setting], None] = lambda setting: None  # before any writer (the catalog)
    # Ray's own writer of the format, if any: (ray dataset, dest, setting) -> None
    ray_writer: str | None = None
    ray_write: Callable[[Any, str, Setting], None] | None = None
    ray_writer_needs: tuple[str, ...] = ()


# --- Iceberg: the catalog ------------------------------------------------------------------


def sql_catalog(directory: str) -> dict[str, str]:
    """pyiceberg `load_catalog` properties of a SQL catalog on SQLite in `directory`."""
    os.makedirs(directory, exist_ok=True)
    return {
        "type": "sql",
        "uri": f"sqlite:///{os.path.join(directory, 'catalog.db')}",
        "warehouse": f"file://{os.path.join(directory, 'warehouse')}",
    }


def load_catalog(properties: dict[str, str]) -> Any:
    from pyiceberg.catalog import load_catalog as load

    catalog = load("default", **properties)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    return catalog


def identifier_for(dest: str) -> str:
    """The table identifier of a bench run's destination (unique per writer and run)."""
    return f"{NAMESPACE}." + re.sub(r"[^A-Za-z0-9]+", "_", os.path.basename(dest))


def create_iceberg_table(catalog: Any, dest: str, schema: pa.Schema, partition_by: list[str]):
    """The Iceberg table at `dest`, identity-partitioned by `partition_by`, in one catalog
    commit (what a user of pyiceberg does before `append`: pyiceberg and Ray's sink need a
    table that exists)."""
    create = catalog.create_table_transaction(identifier_for(dest), schema=schema, location=dest)
    with create.update_spec() as spec:
        for column in partition_by:
            spec.add_identity(column)
    create.commit_transaction()
    return catalog.load_table(identifier_for(dest))


def iceberg_static(dest: str) -> Any:
    """The Iceberg table at `dest` as pyiceberg's `StaticTable` of its newest metadata file
    (whichever catalog made it)."""
    from pyiceberg.table import StaticTable

    metadata = os.path.join(dest, "metadata")
    newest = max(
        (f for f in os.listdir(metadata) if f.endswith(".metadata.json")),
        key=lambda f: (int(f.split("-", 1)[0]) if f.split("-", 1)[0].isdigit() else -1, f),
    )
    return StaticTable.from_metadata(os.path.join(metadata, newest))


@contextmanager
def downcast_ns() -> Iterator[None]:
    """pyiceberg writes nanosecond timestamps as microseconds while inside."""
    before = os.environ.get(DOWNCAST_ENV)
    os.environ[DOWNCAST_ENV] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DOWNCAST_ENV, None)
        else:
            os.environ[DOWNCAST_ENV] = before


# --- the writers and readers of each format --------------------------------------------------


def _deltalake_write(data: pa.Table, dest: str, setting: Setting) -> None:
    from deltalake import write_deltalake

    write_deltalake(dest, data, partition_by=list(setting.partition_by) or None)


def _pyiceberg_write(data: pa.Table, dest: str, setting: Setting) -> None:
    with downcast_ns():
        catalog = load_catalog(setting.catalog)
        create_iceberg_table(catalog, dest, data.schema, list(setting.partition_by)).append(data)


def _deltalake_read(dest: str, setting: Setting) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(dest).to_pyarrow_table()


def _polars_delta_read(dest: str, setting: Setting) -> pa.Table:
    import polars as pl

    return pl.read_delta(dest).to_arrow()


def _iceberg_table(dest: str, setting: Setting) -> Any:
    """The Iceberg table at `dest` as the run's catalog has it (the current snapshot that
    won the catalog's commit, whatever files losers of a race left)."""
    return load_catalog(setting.catalog).load_table(identifier_for(dest))


def _pyiceberg_read(dest: str, setting: Setting) -> pa.Table:
    return _iceberg_table(dest, setting).scan().to_arrow()


def _polars_iceberg_read(dest: str, setting: Setting) -> pa.Table:
    import warnings

    import polars as pl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pl.scan_iceberg(_iceberg_table(dest, setting)).collect().to_arrow()


def _delta_versions(dest: str, setting: Setting) -> int:
    """The commits in the table: one a version, or each job a group commit's version names."""
    from deltalake import DeltaTable

    from ..commit.table.delta.commit_info import jobs_of

    return sum(max(1, len(jobs_of(e))) for e in DeltaTable(dest).history())


def _iceberg_versions(dest: str, setting: Setting) -> int:
    """The commits in the table: one a snapshot, or each job a group's snapshot names."""
    from ..commit.table.iceberg.catalog import jobs_of

    snapshots = _iceberg_table(dest, setting).snapshots()
    return sum(max(1, len(jobs_of(s.summary))) for s in snapshots)


def _hudi_read(dest: str, setting: Setting) -> pa.Table:
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(dest).build()
    batches = list(table.read())
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def _hudi_versions(dest: str, setting: Setting) -> int:
    """The commits in the table: its completed instants, as hudi-rs's timeline lists them."""
    from hudi import HudiTableBuilder

    return len(HudiTableBuilder.from_base_uri(dest).build().get_timeline().get_completed_commits())


def _iceberg_rows(dest: str) -> int:
    """Rows of the Iceberg table at `dest`, through pyiceberg's scan of its newest metadata
    file (whichever catalog made it)."""
    return iceberg_static(dest).scan().to_arrow().num_rows


def _hudi_rows(dest: str) -> int:
    """Rows of the Hudi table at `dest`, through hudi-rs."""
    from hudi import HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(dest).build()
    return sum(batch.num_rows for batch in table.read())


def _ray_iceberg_write(ds: Any, dest: str, setting: Setting) -> None:
    """Ray's `Dataset.write_iceberg` into a table made first (Ray's sink needs one)."""
    catalog = load_catalog(setting.catalog)
    create_iceberg_table(catalog, dest, ds.schema().base_schema, list(setting.partition_by))
    ds.write_iceberg(identifier_for(dest), catalog_kwargs={"name": "default", **setting.catalog})


PEERS: dict[str, FormatPeers] = {
    p.format: p
    for p in (
        FormatPeers(
            "delta",
            options=lambda dest, s: {},
            readers=(
                Reader("deltalake", _deltalake_read),
                Reader("polars.read_delta", _polars_delta_read),
            ),
            rows=delta_rows,
            writer="deltalake",
            write=_deltalake_write,
            writer_needs=("deltalake",),
            versions=_delta_versions,
        ),
        FormatPeers(
            "iceberg",
            options=lambda dest, s: {"catalog": s.catalog, "identifier": identifier_for(dest)},
            readers=(
                Reader("pyiceberg", _pyiceberg_read),
                Reader("polars.scan_iceberg", _polars_iceberg_read),
            ),
            rows=_iceberg_rows,
            writer="pyiceberg",
            write=_pyiceberg_write,
            writer_needs=("pyiceberg.catalog.sql",),
            versions=_iceberg_versions,
            setup=lambda setting: load_catalog(setting.catalog),  # its namespace made
            ray_writer="ray write_iceberg",
            ray_write=_ray_iceberg_write,
            ray_writer_needs=("pyiceberg.catalog.sql",),
        ),
        FormatPeers(
            "hudi",
            options=lambda dest, s: {"table_name": s.table_name, "record_key": s.record_key},
            readers=(Reader("hudi-rs", _hudi_read),),
            rows=_hudi_rows,
            versions=_hudi_versions,
            no_writer="no Python writer to compare with (hudi-rs reads Hudi tables, it does "
            "not write them)",
        ),
    )
}
