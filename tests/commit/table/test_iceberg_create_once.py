"""What a job creating an Iceberg table asks once, not every time: its create transaction's
metadata (`memo.py`: built once per change, as an append's), and the namespace, made or found
once per catalog in a process (`catalog.ensure_namespace`), asked again once a commit says it
is gone."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchNamespaceError

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.iceberg.committer import IcebergFormat
from dataferry.store import open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})


def catalog_options(tmp_path, table: str) -> dict:
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}"}
    props["warehouse"] = tmp_path.as_uri()
    return {"catalog": {"name": "c", **props}, "identifier": f"ns.{table}"}


def write(tmp_path, table: str) -> None:
    dataferry.write_dataset(
        ROWS, str(tmp_path / table), partition_by=["day"], committer="iceberg",
        committer_options=catalog_options(tmp_path, table), progress=False,
    )  # fmt: skip


def rows_of(tmp_path, table: str) -> list[int]:
    props = dict(catalog_options(tmp_path, table)["catalog"])
    catalog = SqlCatalog(props.pop("name"), **props)
    return sorted(catalog.load_table(f"ns.{table}").scan().to_arrow()["id"].to_pylist())


def test_a_create_transactions_metadata_is_built_once_per_change(tmp_path) -> None:
    url = str(tmp_path / "t")
    fmt = committer_by_name("iceberg", open_store(url)).format
    assert isinstance(fmt, IcebergFormat)
    where = fmt.where()
    tx = fmt._create_transaction(where, ROWS.schema, ["day"])
    first = tx.table_metadata
    assert tx.table_metadata is first  # not rebuilt (and deep-copied) while nothing changed
    assert first.spec().fields and first.properties.get("schema.name-mapping.default")
    tx.set_properties(marked="yes")
    staged = tx.table_metadata
    assert staged is not first and staged.properties["marked"] == "yes"
    assert "marked" not in first.properties
    tx.commit_transaction()  # the catalog creates the table from the staged changes
    tbl = fmt.table(where)
    assert tbl.metadata.properties["marked"] == "yes"
    assert [f.name for f in tbl.spec().fields] == ["day"]


def test_the_namespace_is_made_once_per_catalog_in_a_process(tmp_path, monkeypatch) -> None:
    asked: list[tuple[str, ...]] = []
    real = Catalog.create_namespace_if_not_exists

    def create_namespace_if_not_exists(self, namespace, properties=None):
        asked.append(tuple(namespace))
        return real(self, namespace, **({"properties": properties} if properties else {}))

    monkeypatch.setattr(Catalog, "create_namespace_if_not_exists", create_namespace_if_not_exists)
    write(tmp_path, "one")
    write(tmp_path, "two")  # a new table in the same namespace of the same catalog
    assert asked == [("ns",)]
    assert rows_of(tmp_path, "one") == rows_of(tmp_path, "two") == [1, 2]


def test_a_namespace_a_commit_finds_gone_is_made_again(tmp_path, monkeypatch) -> None:
    """Known to the process, the namespace is not asked for; a commit that finds it gone
    (a catalog whose namespace was dropped since) makes it forgotten, and the job's commit,
    decided, is finished on the namespace made again: the job lands."""
    write(tmp_path, "one")  # the namespace is known to this process from here on
    asked: list[tuple[str, ...]] = []
    refused: list[str] = []
    real_create = Catalog.create_namespace_if_not_exists
    real_commit = SqlCatalog.commit_table

    def create_namespace_if_not_exists(self, namespace, properties=None):
        asked.append(tuple(namespace))
        return real_create(self, namespace)

    def commit_table(self, table, requirements, updates):
        if not asked:  # as a catalog whose namespace was dropped since answers
            refused.append(".".join(table.name()))
            raise NoSuchNamespaceError("Namespace does not exist: ns")
        return real_commit(self, table, requirements, updates)

    monkeypatch.setattr(Catalog, "create_namespace_if_not_exists", create_namespace_if_not_exists)
    monkeypatch.setattr(SqlCatalog, "commit_table", commit_table)
    write(tmp_path, "two")
    assert refused and set(refused) == {"ns.two"}  # taken as known at first
    assert asked == [("ns",)]  # then asked again, once forgotten
    assert rows_of(tmp_path, "two") == [1, 2]
