"""HDFS through hdfs-native, on a real NameNode (the suite's MiniDFSCluster): each capability
the store declares, checked by experiment, and what `check-store` recommends there."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from dataferry.commit.factory import choose_committer
from dataferry.errors import AlreadyExists, StoreError
from dataferry.store import open_store
from dataferry.store.hdfs import CAPABILITIES, HdfsStore

pytestmark = pytest.mark.xdist_group("hdfs")


def _other_client(url: str) -> HdfsStore:
    """A store at `url` with a client (and NameNode connection) of its own."""
    return HdfsStore(url, {"dfs.client.dataferry-tests.fresh": str(time.monotonic_ns())})


def _lister(store, directory: str, stop: threading.Event, seen: list) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            seen.append(frozenset(s.path for s in store.list(directory)))

    t = threading.Thread(target=run)
    t.start()
    return t


def test_the_url_opens_hdfs_native_with_hdfs_capabilities(hdfs_url):
    store = open_store(hdfs_url)
    assert isinstance(store, HdfsStore) and store.url == hdfs_url
    assert store.capabilities == CAPABILITIES["hdfs"]
    assert choose_committer(store) == "manifest"


def test_atomic_file_rename_one_winner_and_never_half_seen(hdfs_url):
    """Eight renames onto one name from eight clients: the NameNode lets exactly one through
    and the file is the winner's; a reader listing meanwhile sees the file under one name,
    never both or neither. A store whose rename were a check then a move (or a copy) would let
    two through, or show the file twice: a committer's renamed output could be overwritten."""
    stores = [_other_client(hdfs_url) for _ in range(8)]
    for i, s in enumerate(stores):
        s.write_bytes(f"src/{i}", str(i).encode())

    def rename(i: int) -> bool:
        try:
            stores[i].rename(f"src/{i}", "src/dst")
        except AlreadyExists:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        won = [i for i, ok in zip(range(8), pool.map(rename, range(8)), strict=True) if ok]
    assert len(won) == 1
    assert stores[0].read_bytes("src/dst") == str(won[0]).encode()

    store = stores[0]
    store.write_bytes("flip/a", b"x")
    stop, seen = threading.Event(), []
    lister = _lister(_other_client(hdfs_url), "flip", stop, seen)
    names = ["flip/a", "flip/b"]
    for n in range(60):
        store.rename(names[n % 2], names[(n + 1) % 2])
    stop.set()
    lister.join()
    assert seen and all(len(s) == 1 for s in seen), [sorted(s) for s in seen if len(s) != 1]


def test_atomic_dir_rename_never_half_seen(hdfs_url):
    """A directory of 40 files renamed back and forth while another client lists its parent
    and the directory: every listing shows one directory, whole. A directory renamed file by
    file would show both directories (or a part of the files): v1's job commit and the Hive
    load rename whole directories and count on this."""
    store = open_store(hdfs_url)
    raw = store.client
    for i in range(40):
        raw.create(f"{store.root}/p/d1/f{i:02}").close()
    stop, seen = threading.Event(), []
    other = _other_client(hdfs_url)
    lister = _lister(other, "p", stop, seen)
    names = ["p/d1", "p/d2"]
    for n in range(30):
        store.rename(names[n % 2], names[(n + 1) % 2])
        inside = other.list(names[(n + 1) % 2])
        assert len(inside) == 40
    stop.set()
    lister.join()
    assert seen and all(len(s) == 1 for s in seen), [sorted(s) for s in seen if len(s) != 1]


def test_o1_dir_rename_costs_one_namenode_call_whatever_the_files(hdfs_url):
    """Renaming a directory of 400 files takes one rename call and about the time of renaming
    one of a single file. Were it per file, v1's job commit (a directory rename per task)
    would cost a NameNode call per file, and `auto`'s choice would be wrong."""
    store = open_store(hdfs_url)
    raw = store.client
    for i in range(400):
        raw.create(f"{store.root}/many/f{i:03}").close()
    raw.create(f"{store.root}/one/f").close()

    def timed(name: str) -> float:
        times = []
        for n in range(5):
            start = time.perf_counter()
            store.rename(name, f"{name}-{n}")
            times.append(time.perf_counter() - start)
            store.rename(f"{name}-{n}", name)
        return sorted(times)[2]

    one, many = timed("one"), timed("many")
    assert many < max(4 * one, one + 0.05), (one, many)
    assert len(store.list("many")) == 400
    assert store.stats.counter("op_rename") == 20  # one call per rename, files or not


def test_consistent_listing_another_client_sees_a_write_at_once(hdfs_url):
    """A file written and closed by one client is listed and read by another at once (the
    NameNode answers both). A stale listing would make a manifest job commit miss a task's
    output, or a cleanup miss what it must remove."""
    writer, reader = open_store(hdfs_url), _other_client(hdfs_url)
    for i in range(20):
        writer.write_bytes(f"c/f{i}", b"%d" % i)
        assert f"c/f{i}" in {s.path for s in reader.list("c")}
        assert reader.read_bytes(f"c/f{i}") == b"%d" % i
    writer.delete("c/f0")
    assert "c/f0" not in {s.path for s in reader.list("c")}


def test_exclusive_create_one_winner_among_clients(hdfs_url):
    """Eight clients create the same file without overwrite at once: one succeeds, the file is
    its, and the seven others are told it exists. The claim of a destination and the manifest
    committer's markers rely on this; a check-then-write would let two jobs both win."""
    stores = [_other_client(hdfs_url) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        created = list(
            pool.map(lambda i: stores[i].create_if_absent("x/claim", b"%d" % i), range(8))
        )
    assert created.count(True) == 1
    assert stores[0].read_bytes("x/claim") == b"%d" % created.index(True)
    with pytest.raises(AlreadyExists):
        stores[1].write_bytes("x/claim", b"again", overwrite=False)
    assert [s.path for s in stores[0].walk("x")] == ["x/claim"]  # no temporary name left


def test_a_stalled_close_is_closed_by_the_namenode_and_the_record_is_whole(hdfs_url):
    """On this cluster about half the closes of a small file stall (hdfs-native retries the
    NameNode's `complete` half a second later); the store asks the NameNode to close such a
    file once it holds the whole file (store/hdfs/close.py). Twelve records: some closed so,
    each whole, no temporary name left, none taking the half second. Broken, each stalled
    record costs a job commit 0.5 s (the claim, the intent, `_SUCCESS`), or a record is cut
    short."""
    store = open_store(hdfs_url)
    took = []
    for i in range(40):  # twelve, and more until one close has stalled (most do; not all)
        began = time.perf_counter()
        store.write_bytes(f"r/rec{i}.json", b"%02d" % i * 150)
        took.append(time.perf_counter() - began)
        if i >= 11 and store.stats.counters.get("hdfs_closed_by_lease_recovery", 0) > 0:
            break
    n = len(took)
    assert store.stats.counters.get("hdfs_closed_by_lease_recovery", 0) > 0
    assert [store.read_bytes(f"r/rec{i}.json") for i in range(n)] == [
        b"%02d" % i * 150 for i in range(n)
    ]
    assert sorted(s.path for s in store.walk("r")) == sorted(f"r/rec{i}.json" for i in range(n))
    assert sorted(took)[n // 2] < 0.4, took


def test_check_store_recommends_what_auto_picks(hdfs_url):
    """`dataferry check-store` measures the NameNode (renames independent of size and of the
    number of files, exclusive creates) and recommends the committer `auto` picks from the
    declared capabilities: were they to disagree, one of them would be wrong about HDFS."""
    from dataferry.verify.probe import probe_store

    for _ in range(3):  # its timings are medians of three: a busy machine can sway one probe
        report = probe_store(hdfs_url)
        measured = report.measured()
        if measured["atomic_o1_file_rename"] and measured["atomic_o1_dir_rename"]:
            break
    assert measured["consistent_listing"] and measured["conditional_create"]
    assert measured["atomic_o1_file_rename"] and measured["atomic_o1_dir_rename"], measured
    assert report.recommended == choose_committer(open_store(hdfs_url)) == "manifest"


def test_an_hdfs_native_file_system_object_is_the_same_store(hdfs_cluster, hdfs_url):
    """hdfs-native's own fsspec file system handed in gets the HDFS store (its renames and
    exclusive creates), not fsspec's generic one with nothing atomic."""
    from hdfs_native.fsspec import HdfsFileSystem

    fs = HdfsFileSystem(host="127.0.0.1", port=hdfs_cluster["port"])
    path = hdfs_url.split(str(hdfs_cluster["port"]), 1)[1]
    store = open_store(path, filesystem=fs)
    assert isinstance(store, HdfsStore) and store.url == hdfs_url
    store.write_bytes("f", b"1")
    assert open_store(hdfs_url).read_bytes("f") == b"1"


def test_errors_name_the_url(hdfs_url):
    store = open_store(hdfs_url)
    store.write_bytes("file", b"x")
    with pytest.raises(StoreError, match=r"/file"):
        store.mkdirs("file/below")
    with pytest.raises(StoreError, match=r"not empty|non empty"):
        store.write_bytes("dir/a", b"1") or store.delete("dir", recursive=False)
