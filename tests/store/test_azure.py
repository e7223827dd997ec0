"""The Azure store on Azurite (a Blob account) and its capabilities read from the account."""

from __future__ import annotations

import pytest

from dataferry.commit.factory import choose_committer
from dataferry.errors import NotFound
from dataferry.store import open_store
from dataferry.verify.probe import probe_store

pytestmark = pytest.mark.xdist_group("azurite")


@pytest.fixture
def store(azurite_url):
    return open_store(azurite_url.url, storage_options=azurite_url.storage_options)


def test_a_blob_account_renames_by_copy_and_auto_picks_the_block_list_committer(store):
    """Broken, `auto` would pick a rename committer on Azure Blob, where adlfs's rename is a
    copy and a delete: a job's commit would copy every byte and be visible half done."""
    caps = store.capabilities
    assert not caps.atomic_file_rename and not caps.o1_dir_rename and not caps.atomic_dir_rename
    assert caps.block_lists and caps.multipart_upload and caps.conditional_create
    assert choose_committer(store) == "blocklist"


def test_check_store_recommends_what_auto_picks(azurite_url, store):
    """Broken, `dataferry check-store` would advise another committer than the one `auto`
    runs there (a fast emulator copy looks like an O(1) rename)."""
    report = probe_store(azurite_url.url)
    assert report.recommended == choose_committer(store) == "blocklist"


def test_staged_blocks_are_invisible_and_each_upload_commits_only_its_own(store):
    """Broken, a reader would see a file before its job commits, or a second attempt's blocks
    would mix into the first attempt's file."""
    first = store.initiate_upload("d/f")
    second = store.initiate_upload("d/f")
    ids = [store.upload_part("d/f", first, n, bytes([65 + n]) * 3) for n in (1, 2)]
    other = [store.upload_part("d/f", second, 1, b"zzz")]
    assert not store.exists("d/f")
    assert {u.upload_id for u in store.list_uploads("")} == {first, second}
    store.complete_upload("d/f", first, ids)
    assert store.read_bytes("d/f") == b"BBBCCC"
    assert store.upload_completed("d/f", first, ids)
    assert not store.upload_completed("d/f", second, other)
    assert store.list_uploads("") == []  # the commit dropped the other attempt's blocks
    with pytest.raises(NotFound):
        store.complete_upload("d/f", second, other)
    assert store.read_bytes("d/f") == b"BBBCCC"


def test_an_abort_keeps_a_live_twin_and_the_last_abort_leaves_nothing(store):
    """Broken, aborting a failed attempt would destroy its speculative twin's staged blocks
    (that job's commit then fails), or aborted blocks would stay listed as pending."""
    a = store.initiate_upload("f")
    b = store.initiate_upload("f")
    a_ids = [store.upload_part("f", a, 1, b"aaa")]
    b_ids = [store.upload_part("f", b, 1, b"bbb")]
    assert store.abort_upload("f", a) is True
    assert [u.upload_id for u in store.list_uploads("")] == [b]
    assert store.abort_upload("f", a) is False
    store.complete_upload("f", b, b_ids)
    assert store.read_bytes("f") == b"bbb"
    c = store.initiate_upload("g")
    store.upload_part("g", c, 1, b"ccc")
    assert store.abort_upload("g", c) is True
    assert store.list_uploads("") == [] and not store.exists("g")
    assert not store.upload_completed("f", a, a_ids)


def test_an_empty_file_commits_without_a_staged_block(store):
    """Broken, an empty output file would fail its job commit (no block to list)."""
    u = store.initiate_upload("empty")
    ids = [store.upload_part("empty", u, 1, b"")]
    store.complete_upload("empty", u, ids)
    assert store.read_bytes("empty") == b""
    assert store.upload_completed("empty", u, ids)


def test_an_account_with_a_hierarchical_namespace_is_a_rename_store(monkeypatch, azurite_url):
    """Broken, an ADLS Gen2 account would be treated as a Blob account (or the reverse):
    `auto` must pick `manifest` there, whose renames the Data Lake API makes atomic. No
    emulator has a hierarchical namespace: the account's answer is faked here."""
    from dataferry.store.azure import account

    monkeypatch.setattr(account, "_HNS", {})
    monkeypatch.setattr(
        "azure.storage.blob.BlobServiceClient.get_account_information",
        lambda self: {"is_hns_enabled": True},
    )
    hns = open_store(azurite_url.url, storage_options=azurite_url.storage_options)
    assert hns.capabilities.atomic_file_rename and hns.capabilities.o1_dir_rename
    assert choose_committer(hns) == "manifest"


def test_uploads_list_and_abort_see_staged_blocks(store):
    """Broken, `dataferry uploads list|abort` would not see (or could not drop) the blocks a
    dead task staged on Azure: invisible, and kept for a week."""
    from dataferry.commit.job.cleanup import abort_uploads

    u = store.initiate_upload("part/f")
    store.upload_part("part/f", u, 1, b"staged")
    report = abort_uploads(store, older_than_s=0.0, dry_run=True)
    assert [(p.path, p.upload_id) for p in report.pending] == [("part/f", u)]
    assert store.list_uploads("") != []
    abort_uploads(store, older_than_s=0.0)
    assert store.list_uploads("") == [] and not store.exists("part/f")


def test_a_recursive_delete_sends_its_batches_at_once(store, monkeypatch):
    """One Blob Batch request after another, a job's cleanup of its records (a `.pending`
    and a marker a file) took most of its commit on Azurite. Broken, the batches go one at a
    time again; everything below is deleted, the files beside it kept."""
    import threading
    import time

    store.write_bytes("keep", b"1")
    for i in range(70):
        store.write_bytes(f"job/t/{i}", b"x")
    container = store._blobs.get_container_client(store.container)
    cls = type(container)
    real = cls.delete_blobs
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def counted(self, *blobs, **kwargs):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        try:
            time.sleep(0.05)  # long enough for the other batches to start
            return real(self, *blobs, **kwargs)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(cls, "delete_blobs", counted)
    assert store.delete("job", recursive=True)
    assert state["peak"] > 1
    assert [s.path for s in store.walk("")] == ["keep"] and not store.exists("job")


def test_the_sdks_errors_that_adlfs_lets_through_are_the_stores(store, monkeypatch):
    """adlfs passes some Azure SDK errors through unconverted: a blob that vanishes between
    its listing and the next request raised `ResourceNotFoundError`, which no caller knew
    (the referee saw a job fail in its claim stage on Azurite with "BlobNotFound" while
    another job released its claim). Every operation now turns them into the store's own:
    not found is `NotFound`, and an answer lost to a timeout is an ambiguous outcome, which
    an idempotent operation (a stat) asks again."""
    from azure.core.exceptions import ResourceNotFoundError, ServiceResponseTimeoutError

    store.write_bytes("claim", b"held")
    fs = store.fs  # adlfs's sync methods are its instance's (fsspec mirrors the async ones)
    real = fs.info
    asked = {"n": 0}

    def vanished(*args, **kwargs):
        raise ResourceNotFoundError("The specified blob does not exist.")

    monkeypatch.setattr(fs, "info", vanished)
    with pytest.raises(NotFound):
        store.stat("claim")
    assert not store.exists("claim")  # exists() answers, where it raised

    def timeout_once(*args, **kwargs):
        asked["n"] += 1
        if asked["n"] == 1:
            raise ServiceResponseTimeoutError("Timeout on reading data from socket")
        return real(*args, **kwargs)

    monkeypatch.setattr(fs, "info", timeout_once)
    assert store.stat("claim").size == 4 and asked["n"] == 2
