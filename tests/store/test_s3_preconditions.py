"""Conditional writes as real S3 enforces them, on SeaweedFS (moto ignores most of them): what
the S3 store relies on (If-None-Match creates, a rename's copy onto an absent key of the
version it listed), how S3's 412 and moto's 404 map to dataferry's errors, multipart edges,
and s3fs's answer to an exclusive create when dataferry goes through s3fs."""

from __future__ import annotations

import errno

import botocore.exceptions
import pytest

from dataferry.errors import AlreadyExists, NotFound, PreconditionFailed
from dataferry.store import open_store
from dataferry.store.oserrors import exists_refusal
from dataferry.store.s3 import S3Store

pytestmark = pytest.mark.xdist_group("seaweedfs")


@pytest.fixture
def store(seaweed, seaweed_url) -> S3Store:
    return open_store(seaweed_url, storage_options=seaweed.storage_options)


def _answer(call) -> int:
    try:
        return call()["ResponseMetadata"]["HTTPStatusCode"]
    except botocore.exceptions.ClientError as e:
        return e.response["ResponseMetadata"]["HTTPStatusCode"]


def test_seaweedfs_enforces_the_preconditions_moto_ignores(store):
    """The server these tests run on answers 412 where AWS does. Were it to stop (a new
    SeaweedFS release), every test below would pass without testing anything."""
    c, b = store.client, store.bucket
    key = store._key
    c.put_object(Bucket=b, Key=key("a"), Body=b"1")
    c.put_object(Bucket=b, Key=key("b"), Body=b"2")
    upload = c.create_multipart_upload(Bucket=b, Key=key("m"))["UploadId"]
    etag = c.upload_part(Bucket=b, Key=key("m"), UploadId=upload, PartNumber=1, Body=b"x")["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": etag}]}
    answers = {
        "put if-none-match on an existing key": _answer(
            lambda: c.put_object(Bucket=b, Key=key("a"), Body=b"x", IfNoneMatch="*")
        ),
        "put if-match, wrong etag": _answer(
            lambda: c.put_object(Bucket=b, Key=key("a"), Body=b"x", IfMatch='"0"')
        ),
        "put if-match on an absent key": _answer(
            lambda: c.put_object(Bucket=b, Key=key("none"), Body=b"x", IfMatch='"0"')
        ),
        "copy if-none-match onto an existing key": _answer(
            lambda: c.copy_object(
                Bucket=b, Key=key("b"), CopySource={"Bucket": b, "Key": key("a")}, IfNoneMatch="*"
            )
        ),
        "copy, wrong copy-source-if-match": _answer(
            lambda: c.copy_object(
                Bucket=b,
                Key=key("c"),
                CopySource={"Bucket": b, "Key": key("a")},
                CopySourceIfMatch='"0"',
            )
        ),
        "complete, wrong if-match": _answer(
            lambda: c.complete_multipart_upload(
                Bucket=b, Key=key("m"), UploadId=upload, MultipartUpload=parts, IfMatch='"0"'
            )
        ),
    }
    assert answers == dict.fromkeys(answers, 412)
    assert store.read_bytes("a") == b"1" and store.read_bytes("b") == b"2"
    assert not store.exists("c") and not store.exists("m")


def test_an_exclusive_create_of_an_existing_key_is_refused(store):
    """create_if_absent is how claims, intents and records are taken by exactly one writer:
    mapped wrong, two jobs would both believe they hold a destination (or neither would)."""
    assert store.create_if_absent("claim", b"first") is True
    assert store.create_if_absent("claim", b"second") is False
    with pytest.raises(AlreadyExists):
        store.write_bytes("claim", b"third", overwrite=False)
    assert store.read_bytes("claim") == b"first"


def test_a_rename_never_overwrites_a_file_that_appears_after_its_check(store, monkeypatch):
    """The rename's own check of the destination races other writers: the copy itself must be
    conditional, or a file another writer put there meanwhile is silently replaced."""
    store.write_bytes("src", b"mine")
    real_head = store._head
    store.write_bytes("dst", b"theirs")  # there before the copy, unseen by the check
    unseen = ["dst"]  # the first look at dst misses it; later ones see it

    def head(p):
        if p in unseen:
            unseen.remove(p)
            return None
        return real_head(p)

    monkeypatch.setattr(store, "_head", head)
    monkeypatch.setattr(store, "_is_dir", lambda p: False)
    with pytest.raises(AlreadyExists):
        store.rename("src", "dst")
    monkeypatch.undo()
    assert store.read_bytes("dst") == b"theirs" and store.read_bytes("src") == b"mine"


def test_a_rename_does_not_move_a_source_rewritten_after_it_was_read(store, monkeypatch):
    """A source rewritten between the rename's look and its copy: the copy names the version
    it looked at, and the rename fails with PreconditionFailed leaving both sides as they were
    (else it would move a version it never saw and delete the newer one)."""
    store.write_bytes("src", b"old")
    stale = store._head("src")
    store.write_bytes("src", b"new, longer")
    real_head = store._head
    monkeypatch.setattr(store, "_head", lambda p: stale if p == "src" else real_head(p))
    with pytest.raises(PreconditionFailed):
        store.rename("src", "dst")
    monkeypatch.undo()
    assert store.read_bytes("src") == b"new, longer" and not store.exists("dst")


def test_a_directory_rename_never_overwrites_inside_the_destination(store, monkeypatch):
    """Per-object copies of a directory rename are conditional too."""
    store.write_bytes("d/x", b"mine")
    store.write_bytes("e/x", b"theirs")
    monkeypatch.setattr(store, "_is_dir", lambda p: p != "e")
    with pytest.raises(AlreadyExists):
        store.rename("d", "e")
    monkeypatch.undo()
    assert store.read_bytes("e/x") == b"theirs" and store.read_bytes("d/x") == b"mine"


def _client_error(code: str, status: int) -> botocore.exceptions.ClientError:
    response = {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return botocore.exceptions.ClientError(response, "PutObject")


def test_if_match_on_an_absent_key_is_one_outcome_on_s3_and_on_moto(store):
    """Real S3 (SeaweedFS here) answers 412 to If-Match on an absent key, moto 404: a caller
    told NotFound on one and PreconditionFailed on the other would take different branches on
    a mock than in production."""
    c = store.client
    try:
        c.put_object(Bucket=store.bucket, Key=store._key("none"), Body=b"x", IfMatch='"0"')
    except botocore.exceptions.ClientError as e:
        real = e
    else:
        pytest.fail("SeaweedFS accepted If-Match on an absent key")
    moto = _client_error("NoSuchKey", 404)
    outcomes = {type(store._err(e, "none", "write", if_match=True)) for e in (real, moto)}
    assert outcomes == {PreconditionFailed}
    # without a version named, the same codes keep their meaning
    assert type(store._err(real, "none", "write")) is AlreadyExists
    assert type(store._err(moto, "none", "read")) is NotFound


def test_multipart_edges_on_a_real_server(store):
    """Completing again an upload completed by an earlier try whose answer was lost succeeds
    with the same object (as on AWS), so a retried job commit does not fail; completing an
    aborted upload is NotFound, which recovery reads as "nothing left to complete"; an abort
    of a gone upload is never an error that would stop a cleanup."""
    upload = store.initiate_upload("big")
    etag = store.upload_part("big", upload, 1, b"part")
    assert [u.upload_id for u in store.list_uploads("")] == [upload]
    first = store.complete_upload("big", upload, [etag])
    assert store.complete_upload("big", upload, [etag]) == first
    assert store.read_bytes("big") == b"part"
    other = store.initiate_upload("big2")
    assert store.abort_upload("big2", other) is True
    store.abort_upload("big2", other)  # gone: AWS and moto say 404 (False), SeaweedFS 204
    with pytest.raises(NotFound):
        store.complete_upload("big2", other, [etag])
    assert store.list_uploads("") == [] and not store.exists("big2")


def test_s3fs_exclusive_create_on_a_real_server_is_already_exists(seaweed, seaweed_url):
    """s3fs answers a 412 to open("xb") with OSError(EINVAL) unless the answer names its
    condition (AWS's does, SeaweedFS's does not). Where dataferry goes through s3fs (an fsspec
    store over it), that must read as "already exists": as a plain StoreError, a claim taken
    by another job would look like a broken store."""
    import s3fs

    from dataferry.store.fsspec import filesystem_store

    fs = s3fs.S3FileSystem(endpoint_url=seaweed.endpoint, key=seaweed.key, secret=seaweed.secret)
    path = seaweed_url[len("s3://") :]
    fs.pipe_file(f"{path}/taken", b"first")
    with pytest.raises(OSError) as raw, fs.open(f"{path}/taken", "xb") as f:
        f.write(b"second")
    assert raw.value.errno == errno.EINVAL and exists_refusal(raw.value)
    store = filesystem_store(fs, path)
    assert store.create_if_absent("taken", b"second") is False
    assert store.create_if_absent("fresh", b"one") is True
    assert store.read_bytes("taken") == b"first" and store.read_bytes("fresh") == b"one"
