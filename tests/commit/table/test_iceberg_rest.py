"""The Iceberg committer through a REST catalog: SeaweedFS's (tests/servers/iceberg_rest.py),
signed with SigV4 as S3 Tables is, its tables in a table bucket. A write through
`write_dataset` (catalog properties, or a pyiceberg catalog object), read back by pyiceberg on the same catalog; a
table pyiceberg made, appended to by dataferry, and the other way round; a committer with
default options (recovery's, `dataferry cleanup`'s) reaching the catalog from what the table's
location records, without its secrets."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.iceberg import JOB_UUID_KEY
from dataferry.store import open_store

pytestmark = [pytest.mark.xdist_group("seaweedfs"), pytest.mark.filterwarnings("ignore::Warning")]


def data(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "value": pa.array([i / 2 for i in ids]),
            "day": pa.array([f"2024-01-0{1 + i % 2}" for i in ids]),
        }
    )


def rows(table: pa.Table) -> list[dict]:
    return table.select(["id", "value", "day"]).sort_by("id").to_pylist()


def options(rest, identifier: str) -> dict:
    return {"catalog": rest.properties(), "identifier": identifier}


def write(rest, url: str, table: pa.Table, identifier: str, mode: str = "append"):
    return dataferry.write_dataset(
        table,
        url,
        partition_by=["day"],
        committer="iceberg",
        mode=mode,
        storage_options=rest.storage_options,
        committer_options=options(rest, identifier),
    )


def test_write_dataset_creates_and_appends_through_the_rest_catalog(iceberg_rest):
    """Were REST catalog properties not taken (or the table's bucket refusing the store's
    own root key not borne), the write would fail; pyiceberg on the same catalog must see
    one snapshot per job, each carrying the job's id, and every row once."""
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    first = write(iceberg_rest, url, data(30), ident)
    second = write(iceberg_rest, url, data(20, start=100), ident)
    tbl = iceberg_rest.catalog().load_table(ident)
    assert tbl.metadata.location == url
    assert rows(tbl.scan().to_arrow()) == rows(pa.concat_tables([data(30), data(20, start=100)]))
    jobs = [s.summary.get(JOB_UUID_KEY) for s in tbl.snapshots()]
    assert jobs == [first.run.job.job_uuid, second.run.job.job_uuid]
    # overwrite: one snapshot replaces every file
    write(iceberg_rest, url, data(5, start=500), ident, mode="overwrite")
    tbl = iceberg_rest.catalog().load_table(ident)
    assert rows(tbl.scan().to_arrow()) == rows(data(5, start=500))
    # nothing of the job's own bookkeeping is left beside the table's files
    store = open_store(url, storage_options=iceberg_rest.storage_options)
    left = [s.path for s in store.walk("") if not s.path.startswith(("data/", "metadata/"))]
    assert left == ["_dataferry_iceberg/table.json"]


def test_recovery_reaches_the_catalog_without_the_secrets(iceberg_rest, monkeypatch):
    """The table's location records the catalog without its keys; a committer with default
    options (as `dataferry cleanup` and recovery make it) signs with the store's keys. Were
    they not supplied, it would sign with no credentials (none in the environment here) and
    could neither read the table nor say whether a job landed."""
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    done = write(iceberg_rest, url, data(12), ident)
    store = open_store(url, storage_options=iceberg_rest.storage_options)
    recorded = store.read_bytes("_dataferry_iceberg/table.json")
    assert iceberg_rest.server.secret.encode() not in recorded
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    committer = committer_by_name("iceberg", store)
    assert rows(committer.read_rows()) == rows(data(12))
    assert committer.commits_of_job(done.run.job.job_uuid) == 1


def test_a_rest_catalog_object_is_taken_as_its_properties(iceberg_rest):
    """A pyiceberg RestCatalog handed in (not its properties): used on the driver, and what
    the table's location records of it (for recovery) is its properties without secrets, as
    type "rest". Were its type not found, a committer with default options could not reopen
    the catalog and read the table back."""
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    catalog = iceberg_rest.catalog()
    dataferry.write_dataset(
        data(16),
        url,
        partition_by=["day"],
        committer="iceberg",
        mode="append",
        storage_options=iceberg_rest.storage_options,
        committer_options={"catalog": catalog, "identifier": ident},
    )
    assert rows(catalog.load_table(ident).scan().to_arrow()) == rows(data(16))
    store = open_store(url, storage_options=iceberg_rest.storage_options)
    assert rows(committer_by_name("iceberg", store).read_rows()) == rows(data(16))


def test_pyiceberg_and_dataferry_append_to_each_others_table(iceberg_rest):
    """A table pyiceberg created on the REST catalog takes dataferry's appends, and pyiceberg
    appends to the table dataferry created; each reads every row of both (were dataferry to
    write its files where the catalog's table does not lie, or with other field ids, the
    reads would miss or refuse them)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    catalog = iceberg_rest.catalog()
    catalog.create_namespace_if_not_exists("ns")
    # pyiceberg's table, dataferry's append
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    made = catalog.create_table(ident, schema=data(1).schema, location=url)
    with made.update_spec() as spec:
        spec.add_identity("day")
    made = catalog.load_table(ident)
    made.append(data(10))
    write(iceberg_rest, url, data(10, start=100), ident)
    got = catalog.load_table(ident).scan().to_arrow()
    assert rows(got) == rows(pa.concat_tables([data(10), data(10, start=100)]))
    assert isinstance(made.spec(), PartitionSpec)
    assert [f.transform for f in made.spec().fields] == [IdentityTransform()]
    assert all(isinstance(f, PartitionField) for f in made.spec().fields)
    # dataferry's table, pyiceberg's append
    url2, ident2 = iceberg_rest.url(), iceberg_rest.identifier()
    write(iceberg_rest, url2, data(8), ident2)
    theirs = catalog.load_table(ident2)
    theirs.append(data(8, start=200).cast(theirs.schema().as_arrow()))
    write(iceberg_rest, url2, data(8, start=300), ident2)
    got = catalog.load_table(ident2).scan().to_arrow()
    expected = pa.concat_tables([data(8), data(8, start=200), data(8, start=300)])
    assert rows(got) == rows(expected)
