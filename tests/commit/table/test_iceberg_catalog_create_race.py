"""Jobs that open a new SQL catalog at once each create its tables if absent (pyiceberg checks,
then creates): between one job's check and its CREATE another may make them, and that job's
CREATE fails with "table ... already exists". The job must open the catalog again and go on,
not fail; any other error of the catalog still reaches the caller."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog, SqlCatalogBaseTable

import dataferry
from dataferry.commit.table.iceberg.catalog import open_catalog

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def catalog_props(tmp_path) -> dict[str, str]:
    return {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": tmp_path.as_uri(),
    }


@pytest.fixture
def another_job_creates_first(monkeypatch):
    """The first `create_tables` meets tables another job created after this one's check:
    they are made, then this job's own CREATE runs without a check, as it would have."""
    original = SqlCatalog.create_tables
    raced = []

    def create_tables(self) -> None:
        original(self)  # the other job's
        if not raced:
            raced.append(True)
            SqlCatalogBaseTable.metadata.create_all(self.engine, checkfirst=False)
        original(self)

    monkeypatch.setattr(SqlCatalog, "create_tables", create_tables)
    return raced


def test_a_job_that_loses_the_race_to_create_the_catalogs_tables_still_lands(
    tmp_path, another_job_creates_first
):
    """Broken (the CREATE's "already exists" raised), the job fails before its commit though
    the catalog is whole: the failure CI met with four appenders creating one catalog."""
    options = {"catalog": {"name": "c", **catalog_props(tmp_path)}, "identifier": "ns.t"}
    table = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    dataferry.write_dataset(
        table, str(tmp_path / "t"), committer="iceberg", mode="append",
        committer_options=options, progress=False,
    )  # fmt: skip
    assert another_job_creates_first == [True]
    catalog = SqlCatalog("c", **catalog_props(tmp_path))
    assert catalog.load_table("ns.t").scan().to_arrow().column("id").to_pylist() == [1, 2, 3]


def test_a_catalog_that_cannot_be_opened_is_not_retried(tmp_path, monkeypatch):
    """An error that is not the lost race (here: the database's directory does not exist)
    reaches the caller at once, from one try."""
    tries = []
    original = SqlCatalog.__init__

    def counting_init(self, *args, **kwargs) -> None:
        tries.append(True)
        original(self, *args, **kwargs)

    monkeypatch.setattr(SqlCatalog, "__init__", counting_init)
    props = catalog_props(tmp_path / "missing" / "dir")
    with pytest.raises(Exception, match="unable to open database file"):
        open_catalog("c", props)
    assert len(tries) == 1
