"""Stores over local files: links never followed (however they are resolved), whole-file writes
complete or absent (also when the writer is killed), and the store root's own link."""

from __future__ import annotations

import fnmatch
import os
import pickle
import signal
import subprocess
import sys
import threading

import pytest

from dataferry.errors import AlreadyExists, InjectedCrash, LinkRefused
from dataferry.store import open_store, paths


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir()
    (d / "a").write_bytes(b"outside a")
    return d


def _refused(store, link, fn, *args):
    with pytest.raises(LinkRefused) as e:
        fn(*args)
    assert store.full_url(link) in str(e.value), str(e.value)
    assert e.value.path == link


def test_a_nested_link_is_named_and_nothing_is_created_at_a_dangling_target(
    make, tmp_path, outside
):
    root = tmp_path / "store"
    (root / "a").mkdir(parents=True)
    os.symlink(outside, root / "a" / "b")
    nowhere = tmp_path / "nowhere"
    os.symlink(nowhere, root / "dangling")
    os.symlink(tmp_path / "nofile", root / "a" / "file_link")
    store = make(root)
    _refused(store, "a/b", store.write_bytes, "a/b/c/d", b"x")
    _refused(store, "a/b", store.mkdirs, "a/b/c")
    _refused(store, "dangling", store.write_bytes, "dangling/f", b"x")
    _refused(store, "dangling", store.mkdirs, "dangling/x/y")
    _refused(store, "dangling", store.create_if_absent, "dangling/f", b"x")
    _refused(store, "a/file_link", store.write_bytes, "a/file_link", b"x")
    _refused(store, "a/file_link", store.create_if_absent, "a/file_link", b"x")
    _refused(store, "a/file_link", store.append_bytes, "a/file_link", b"x")
    _refused(store, "a/file_link", store.delete, "a/file_link")
    with pytest.raises(LinkRefused), store.open_write("a/file_link") as f:
        f.write(b"x")
    assert not nowhere.exists() and not (tmp_path / "nofile").exists()
    assert sorted(os.listdir(outside)) == ["a"]
    st = store.stat("dangling")  # a link answered as itself, even a dangling one
    assert st.is_link and not st.is_dir
    assert {s.path for s in store.walk("") if s.is_link} == {"a/b", "a/file_link", "dangling"}


def test_the_root_may_be_a_link_resolved_once(make, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    root_link = tmp_path / "dest"
    os.symlink(first, root_link)
    store = make(root_link)
    assert store.url == "file://" + str(root_link)  # the user's name for it
    store.write_bytes("part=1/f", b"1")
    assert (first / "part=1" / "f").read_bytes() == b"1"
    os.unlink(root_link)
    os.symlink(second, root_link)  # re-pointed after the store was opened
    store.write_bytes("part=1/g", b"2")
    assert (first / "part=1" / "g").read_bytes() == b"2"
    assert not (second / "part=1").exists()
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read_bytes("part=1/g") == b"2"


def test_an_interrupted_write_leaves_the_old_file_or_none(make, tmp_path, monkeypatch):
    """The write raises (the process 'dies') after the temporary file was partly written."""
    store = make(tmp_path / "store")
    store.write_bytes("d/rec.json", b'{"old": true}')
    from dataferry.store.local import files as localfiles

    def half_then_crash(fd, data, offset=None):
        os.write(fd, bytes(data)[: len(data) // 2])
        os.close(fd)
        raise InjectedCrash("died mid-write")

    monkeypatch.setattr(localfiles, "write_all", half_then_crash)
    import fsspec.implementations.local as fsspec_local

    def pipe_half_then_crash(self, path, value, **kwargs):
        with open(path, "wb") as f:
            f.write(value[: len(value) // 2])
        raise InjectedCrash("died mid-write")

    monkeypatch.setattr(fsspec_local.LocalFileSystem, "pipe_file", pipe_half_then_crash)
    from fsspec.implementations.arrow import ArrowFSWrapper

    monkeypatch.setattr(ArrowFSWrapper, "pipe_file", pipe_half_then_crash, raising=False)
    big = b"n" * 10_000
    for call in (
        lambda: store.write_bytes("d/rec.json", big),
        lambda: store.write_bytes("d/new.json", big),
        lambda: store.create_if_absent("d/created.json", big),
    ):
        with pytest.raises(InjectedCrash):
            call()
    assert store.read_bytes("d/rec.json") == b'{"old": true}'
    assert not store.exists("d/new.json") and not store.exists("d/created.json")
    assert [s.path for s in store.walk("d")] == ["d/rec.json"]  # the temporary was removed


_CHILD = r"""
import os, signal, sys
from dataferry.store import open_store
import dataferry.store.local.files as local

def half_then_die(fd, data, offset=None):
    os.write(fd, bytes(data)[: len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)

local.write_all = half_then_die
store = open_store(sys.argv[1])
if sys.argv[2] == "stream":
    with store.open_write(sys.argv[3]) as f:
        f.write(b"s" * 5000)
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)
elif sys.argv[2] == "create":
    store.create_if_absent(sys.argv[3], b"c" * 5000)
else:
    store.write_bytes(sys.argv[3], b"w" * 5000)
"""


def test_a_writer_killed_mid_write_leaves_no_partial_file(tmp_path):
    root = tmp_path / "store"
    store = open_store(str(root))
    store.write_bytes("p/old", b"complete")
    for how, path in (("write", "p/old"), ("write", "p/new"), ("create", "p/c"), ("stream", "p/s")):
        child = subprocess.run(
            [sys.executable, "-c", _CHILD, str(root), how, path], capture_output=True, timeout=60
        )
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    assert store.read_bytes("p/old") == b"complete"
    left = {s.path for s in store.walk("p")}
    assert "p/old" in left and not left & {"p/new", "p/c", "p/s"}
    leftovers = sorted(left - {"p/old"})
    assert len(leftovers) == 4 and all(paths.is_temporary(p) for p in leftovers)
    for p in leftovers:  # what cleanup does with them: recognise, then delete
        assert store.delete(p)


def test_temporary_names_are_recognisable_and_match_no_data_glob():
    tmp = paths.temporary_name("part-00000.parquet", "ab12cd34ef56")
    assert paths.is_temporary(tmp) and paths.is_temporary(f"x/y/{tmp}")
    assert paths.is_hidden(tmp)
    assert not fnmatch.fnmatch(tmp, "*.parquet")
    assert not paths.is_temporary("part-00000.parquet")
    long = paths.temporary_name("é" * 127, "ab12cd34ef56")  # 254 bytes of name
    assert len(long.encode()) <= 255 and paths.is_temporary(long)


def test_a_stream_is_invisible_until_closed_and_dropped_streams_publish_nothing(make, tmp_path):
    store = make(tmp_path / "store")
    f = store.open_write("s/out.bin")
    f.write(b"x" * 100)
    assert not store.exists("s/out.bin")
    f.close()
    assert store.read_bytes("s/out.bin") == b"x" * 100
    store.write_bytes("s/taken", b"first")
    with pytest.raises(AlreadyExists), store.open_write("s/taken", overwrite=False) as g:
        g.write(b"second")
    assert store.read_bytes("s/taken") == b"first"
    assert sorted(s.path for s in store.walk("s")) == ["s/out.bin", "s/taken"]


def test_create_if_absent_stays_exclusive_across_threads(make, tmp_path):
    store = make(tmp_path / "store")
    wins = []
    barrier = threading.Barrier(6)

    def racer(i):
        barrier.wait()
        if store.create_if_absent("claim", f"{i}".encode()):
            wins.append(i)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert store.read_bytes("claim") == f"{wins[0]}".encode()
    assert [s.path for s in store.walk("")] == ["claim"]


def test_the_read_cap_never_reads_a_large_file_whole(make, tmp_path, monkeypatch):
    from dataferry.errors import RecordTooLarge

    store = make(tmp_path / "store")
    store.write_bytes("big", b"z" * (1 << 20))
    with pytest.raises(RecordTooLarge) as e:
        store.read_bytes("big", max_bytes=1024)
    assert (e.value.size, e.value.max_bytes) == (1 << 20, 1024)
    store.mkdirs("adir")
    with pytest.raises(Exception) as d:
        store.read_bytes("adir", max_bytes=10)
    assert not isinstance(d.value, RecordTooLarge)  # a directory is not "too large"
