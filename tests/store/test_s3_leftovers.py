"""Nothing of dataferry's left visible on a real S3 server that keeps directories (SeaweedFS:
like other S3 servers backed by a file system, it keeps a directory after its last object is
deleted, and a delimiter listing, which Hive-style readers use, still shows it)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.store import open_store

pytestmark = pytest.mark.xdist_group("seaweedfs")


def delimiter_listing(store, path: str = "") -> tuple[list[str], list[str]]:
    """(objects, common prefixes) one level below `path`, as a Hive-style reader lists."""
    prefix = store._dir_prefix(path)
    answer = store.client.list_objects_v2(Bucket=store.bucket, Prefix=prefix, Delimiter="/")
    objects = [o["Key"][len(prefix) :] for o in answer.get("Contents", [])]
    prefixes = [p["Prefix"][len(prefix) :] for p in answer.get("CommonPrefixes", [])]
    return objects, prefixes


@pytest.fixture
def store(seaweed, seaweed_url):
    return open_store(seaweed_url, storage_options=seaweed.storage_options)


def test_deleting_the_last_file_leaves_no_directory_entry(store):
    """A job's files deleted one by one (claims, records, pending files) must not leave their
    directories listed: readers would see `_dataferry/` or `__magic_job-*/` forever."""
    store.write_bytes("keep", b"data")
    store.write_bytes("_job/a/b/file", b"1")
    store.write_bytes("_job/other", b"2")
    assert store.delete("_job/a/b/file")
    assert delimiter_listing(store, "_job") == (["other"], [])
    assert store.delete("_job/other")
    assert delimiter_listing(store) == (["keep"], [])


def test_a_recursive_delete_leaves_no_directory_entries(store):
    """The same for a job directory deleted whole, nested directories included."""
    store.write_bytes("keep", b"data")
    for name in ("_job/x/1", "_job/x/y/2", "_job/z/3"):
        store.write_bytes(name, b"1")
    store.mkdirs("_job/empty")
    assert store.delete("_job", recursive=True)
    assert delimiter_listing(store) == (["keep"], [])


def test_the_root_gets_no_marker_object(seaweed, seaweed_url):
    """mkdirs of the store's own root (a destination being prepared) writes no `dest/`
    object: it would sit beside the data as a zero-byte entry in every listing of it."""
    store = open_store(seaweed_url + "/dest", storage_options=seaweed.storage_options)
    store.mkdirs("")
    store.write_bytes("part-0", b"data")
    parent = open_store(seaweed_url, storage_options=seaweed.storage_options)
    assert delimiter_listing(parent) == ([], ["dest/"])
    assert delimiter_listing(store) == (["part-0"], [])


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_a_job_leaves_only_its_data_and_success(seaweed, seaweed_url, committer):
    """After an ordinary write, a delimiter listing of the destination shows the data and
    `_SUCCESS`: no `__magic_job-*/`, `_dataferry/` or `dest/` entry of the job's own."""
    dest = seaweed_url + "/simple"
    table = pa.table({"a": [1, 2, 3], "p": ["x", "y", "x"]})
    dataferry.write_dataset(
        table,
        dest,
        partition_by=["p"],
        committer=committer,
        storage_options=seaweed.storage_options,
    )
    store = open_store(dest, storage_options=seaweed.storage_options)
    assert delimiter_listing(store) == (["_SUCCESS"], ["p=x/", "p=y/"])
    parent = open_store(seaweed_url, storage_options=seaweed.storage_options)
    assert delimiter_listing(parent) == ([], ["simple/"])


def test_an_aborted_job_leaves_nothing_visible(seaweed, seaweed_url):
    """A job that fails before committing leaves no entry of its own, not even the
    destination's: a reader listing the parent would find an empty data set there."""
    dest = seaweed_url + "/failed"
    committer = dataferry.make_committer(
        "magic", open_store(dest, storage_options=seaweed.storage_options)
    )
    with pytest.raises(RuntimeError), dataferry.open_job(committer) as job:
        task = job.task(0, 0)
        task.setup()
        task.write("p=x/part-0.txt", b"x")
        task.commit()
        raise RuntimeError("the job fails")
    parent = open_store(seaweed_url, storage_options=seaweed.storage_options)
    objects, prefixes = delimiter_listing(parent)
    # no `failed/` left; the parent (not the job's) may show its own emptied entry ("")
    assert prefixes == [] and objects in ([], [""])


def test_the_referee_sees_a_marker_object_at_the_destination(seaweed, seaweed_url):
    """The referee's leftover check lists as readers do: a zero-byte `dest/` object (which
    `Store.list` leaves out) is a leftover. Were it blind to it, the fix above could regress
    with every referee run still clean."""
    from dataferry.store.faults import FaultStore
    from dataferry.verify.invariants import check_no_leftovers

    store = open_store(seaweed_url + "/dest", storage_options=seaweed.storage_options)
    store.write_bytes("_SUCCESS", b"")
    assert check_no_leftovers(FaultStore(store, [])) == []
    store.client.put_object(Bucket=store.bucket, Key=store._dir_prefix(""), Body=b"")
    (problem,) = check_no_leftovers(FaultStore(store, []))
    assert "no_leftovers" in problem and "./" in problem


def test_a_table_bucket_keeps_no_emptied_directory(iceberg_rest):
    """In an S3 Tables bucket SeaweedFS refuses (403) deleting `_dataferry/drivers/` by its
    directory key; left there, every Iceberg job's `_dataferry/` stays listed beside the
    table's `data/` and `metadata/` (75 `no_leftovers` of the referee's REST-catalog run)."""
    store = open_store(iceberg_rest.url(), storage_options=iceberg_rest.storage_options)
    store.write_bytes("data/keep", b"data")
    store.write_bytes("_dataferry/drivers/d.json", b"1")
    store.write_bytes("_dataferry/markers/a/m", b"2")
    assert store.delete("_dataferry/drivers/d.json")
    assert delimiter_listing(store, "_dataferry") == ([], ["markers/"])
    assert store.delete("_dataferry/markers", recursive=True)
    assert delimiter_listing(store) == ([], ["data/"])


def test_an_iceberg_job_on_the_rest_catalog_leaves_only_the_table(iceberg_rest):
    """After an ordinary Iceberg write through the REST catalog, the table's directory lists
    its `data/`, `metadata/` and the location record, no `_dataferry/` of the job's own."""
    url = iceberg_rest.url()
    dataferry.write_dataset(
        pa.table({"a": [1, 2, 3]}),
        url,
        committer="iceberg",
        storage_options=iceberg_rest.storage_options,
        committer_options={
            "catalog": iceberg_rest.properties(),
            "identifier": iceberg_rest.identifier(),
        },
    )
    store = open_store(url, storage_options=iceberg_rest.storage_options)
    assert delimiter_listing(store)[1] == ["_dataferry_iceberg/", "data/", "metadata/"]


def test_marker_objects_name_the_own_entry_only_where_the_parent_lists_it(
    seaweed, seaweed_url, iceberg_rest
):
    """The referee's leftover check reads `marker_objects`: a zero-byte `dest/` object the
    parent's listing shows beside the data must be reported (readers of the parent meet it);
    an S3 Tables bucket's emptied table directory, which the namespace's listing hides and
    the bucket refuses to delete by either name (403), is no entry a reader meets."""
    plain = open_store(seaweed_url + "/dest", storage_options=seaweed.storage_options)
    plain.write_bytes("sub/f", b"1")
    plain.client.put_object(Bucket=plain.bucket, Key=plain._dir_prefix(""), Body=b"")
    assert plain.marker_objects() == [""]
    table = open_store(iceberg_rest.url(), storage_options=iceberg_rest.storage_options)
    table.write_bytes("data/f", b"1")
    assert table.delete("data/f")
    assert table.marker_objects() == []
