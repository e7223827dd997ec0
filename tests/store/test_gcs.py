"""The GCS store (gcsfs) on fake-gcs-server: capabilities from the client, exclusive creates,
resumable sessions as uploads."""

from __future__ import annotations

import base64
import hashlib
import pickle
from concurrent.futures import ThreadPoolExecutor

import pytest

from dataferry.errors import ConfigError, NotFound
from dataferry.store import open_store
from dataferry.store.gcs.sessions import CHUNK, SessionMark

pytestmark = pytest.mark.xdist_group("fakegcs")


@pytest.fixture
def gcs(gcs_url):
    return open_store(gcs_url)


def test_capabilities_say_renames_copy_and_creates_are_conditional(gcs):
    """gcsfs renames by copy: a store declaring atomic renames would let `auto` pick a
    rename committer whose commit is a non-atomic copy of every file."""
    caps = gcs.capabilities
    assert not caps.atomic_file_rename and not caps.atomic_dir_rename
    assert not caps.o1_dir_rename and not caps.multipart_upload
    assert caps.conditional_create and caps.resumable_upload and caps.etags
    assert type(gcs).__name__ == "GcsStore"


def test_the_store_counts_the_requests_it_sends(gcs):
    """`bench commit` on a gs:// server reports a commit's requests from these counts: without
    them its request column says nothing, and a commit that sends twice what it must goes
    unseen. A finalization is one write carrying the held bytes."""
    upload = gcs.initiate_upload("f")
    mark = gcs.upload_part("f", upload, 1, b"abc")
    before = dict(gcs.stats.counters)
    gcs.complete_upload("f", upload, [mark])
    sent = {k: v - before.get(k, 0) for k, v in gcs.stats.counters.items()}
    assert sent["store_requests"] == sent["store_requests_write"] == 1
    assert sent["store_bytes_write"] == 3
    assert pickle.loads(pickle.dumps(gcs)).read_bytes("f") == b"abc"


def test_racing_exclusive_creates_have_one_winner(gcs):
    """ifGenerationMatch=0 (on a multipart upload, which fake-gcs-server honours): without it
    two committers' claims or two writers of a record would both believe they won."""
    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(lambda i: gcs.create_if_absent("claim", str(i).encode()), range(8)))
    assert won.count(True) == 1
    assert gcs.read_bytes("claim") == str(won.index(True)).encode()


def test_a_session_is_invisible_until_finalized(gcs):
    """A session's bytes (whole chunks sent, the rest held in the mark) appear only at
    finalization, with the MD5 the mark predicted: a commit that finalizes early or loses
    the held bytes would publish part of a file."""
    data = b"a" * CHUNK + b"tail"
    upload = gcs.initiate_upload("d/f")
    first = gcs.upload_part("d/f", upload, 1, data[:100])
    last = gcs.upload_part("d/f", upload, 2, data[100:])
    assert SessionMark.decode(first).sent == 0  # nothing whole to send yet
    mark = SessionMark.decode(last)
    assert (mark.sent, mark.held) == (CHUNK, b"tail")
    assert not gcs.exists("d/f") and gcs.list_uploads("") == []
    # finalized by another process: only the last mark is needed
    other = pickle.loads(pickle.dumps(gcs))
    etag = other.complete_upload("d/f", upload, [first, last])
    assert gcs.read_bytes("d/f") == data
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    assert etag == md5 == gcs.upload_etag([first, last]) == gcs.stat("d/f").etag
    with pytest.raises(NotFound):  # the session is gone once finalized
        gcs.complete_upload("d/f", upload, [first, last])


def test_an_empty_file_and_a_whole_chunk_finalize_with_no_bytes(gcs):
    for name, data in (("empty", b""), ("whole", b"w" * CHUNK)):
        upload = gcs.initiate_upload(name)
        mark = gcs.upload_part(name, upload, 1, data)
        assert SessionMark.decode(mark).held == b""
        gcs.complete_upload(name, upload, [mark])
        assert gcs.read_bytes(name) == data


def test_parts_out_of_order_and_foreign_marks_are_refused(gcs):
    upload = gcs.initiate_upload("o")
    with pytest.raises(ConfigError, match="did not send its first part"):
        gcs.upload_part("o", upload, 2, b"x")
    with pytest.raises(ConfigError, match="not a GCS upload session"):
        gcs.complete_upload("o", upload, ['"d41d8cd98f00b204e9800998ecf8427e"'])
    assert gcs.abort_upload("o", upload) is True


def test_rename_copies_then_deletes(gcs):
    gcs.write_bytes("r/a", b"1")
    gcs.write_bytes("r/sub/b", b"2")
    gcs.rename("r", "moved")
    assert [s.path for s in gcs.walk("")] == ["moved/a", "moved/sub/b"]
    assert gcs.stats.counters.get("op_rename", 0) >= 1


def test_a_delete_of_an_empty_directory_keeps_an_object_written_after_its_check(gcs, monkeypatch):
    """Another job's record arrives in a shared directory after the delete found it empty:
    only the directory's own `dir/` object goes. Before, a recursive delete followed the
    check and took the record along."""
    gcs.mkdirs("shared")
    arrived = []

    def arriving_first(remove):
        def removal(*args, **kwargs):
            if not arrived:
                gcs.write_bytes("shared/claim.json", b"{}")
                arrived.append(remove)
            return remove(*args, **kwargs)

        return removal

    monkeypatch.setattr(gcs.fs, "rm", arriving_first(gcs.fs.rm))
    monkeypatch.setattr(gcs.fs, "rm_file", arriving_first(gcs.fs.rm_file))
    assert gcs.delete("shared", recursive=False)
    assert arrived and gcs.read_bytes("shared/claim.json") == b"{}"
    gcs.delete("shared/claim.json")
    assert not gcs.exists("shared")  # nothing left of the directory once its record went
