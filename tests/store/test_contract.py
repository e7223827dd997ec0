"""One contract, every store: local, memory (fsspec), sim models and a fault wrapper."""

from __future__ import annotations

import pickle
import time

import pytest

from dataferry.errors import AlreadyExists, ConfigError, NotFound, StoreError


def test_write_read_stat(any_store):
    any_store.write_bytes("a/b/c.txt", b"hello")
    assert any_store.read_bytes("a/b/c.txt") == b"hello"
    st = any_store.stat("a/b/c.txt")
    assert (st.path, st.size, st.is_dir) == ("a/b/c.txt", 5, False)
    assert any_store.stat("a/b").is_dir
    assert any_store.exists("a/b/c.txt")
    assert not any_store.exists("a/b/nope")


def test_every_listing_gives_the_time_a_file_was_written(any_store):
    """The store's clock is read from the modification times it gives (`records/lease.py`):
    a store whose status leaves them out (adlfs names the field `last_modified`) can judge a
    claim only by watching it for a whole lease, and a leftover's age is unknown."""
    before = time.time()
    any_store.write_bytes("m/f.txt", b"x")
    seen = [any_store.stat("m/f.txt"), *any_store.list("m"), *any_store.walk("m")]
    for st in seen:
        assert st.mtime is not None, st
        # the servers run on this host; sim models keep the same wall clock
        assert before - 120 < st.mtime < time.time() + 120, st


def test_stat_missing_raises_not_found_naming_path(any_store):
    with pytest.raises(NotFound) as e:
        any_store.stat("missing/file")
    assert "missing/file" in str(e.value)


def test_list_one_level_sorted(any_store):
    for name in ("d/z", "d/a", "d/sub/x"):
        any_store.write_bytes(name, b"1")
    listed = any_store.list("d")
    assert [s.path for s in listed] == ["d/a", "d/sub", "d/z"]
    assert [s.is_dir for s in listed] == [False, True, False]
    with pytest.raises(NotFound):
        any_store.list("nothing-here")


def test_walk_recursive_files_only(any_store):
    for name in ("w/1", "w/x/2", "w/x/y/3"):
        any_store.write_bytes(name, name.encode())
    assert [s.path for s in any_store.walk("w")] == ["w/1", "w/x/2", "w/x/y/3"]
    assert [s.size for s in any_store.walk("w")] == [3, 5, 7]
    assert any_store.walk("absent") == []


def test_mkdirs_and_file_in_the_way(any_store):
    any_store.mkdirs("m/n/o")
    assert any_store.stat("m/n/o").is_dir
    any_store.mkdirs("m/n/o")  # idempotent
    any_store.write_bytes("f", b"x")
    with pytest.raises(StoreError):
        any_store.mkdirs("f/below")


def test_delete_file_dir_recursive(any_store):
    any_store.write_bytes("del/a", b"1")
    any_store.write_bytes("del/sub/b", b"2")
    assert any_store.delete("del/a") is True
    assert any_store.delete("del/a") is False
    with pytest.raises(StoreError):
        any_store.delete("del", recursive=False)
    assert any_store.delete("del", recursive=True) is True
    assert not any_store.exists("del")


def test_rename_file(any_store):
    any_store.write_bytes("src/f", b"data")
    any_store.mkdirs("dst")
    any_store.rename("src/f", "dst/g")
    assert any_store.read_bytes("dst/g") == b"data"
    assert not any_store.exists("src/f")


def test_rename_never_overwrites_a_file(any_store):
    any_store.write_bytes("r/a", b"a")
    any_store.write_bytes("r/b", b"b")
    with pytest.raises(AlreadyExists):
        any_store.rename("r/a", "r/b")
    assert any_store.read_bytes("r/a") == b"a"
    assert any_store.read_bytes("r/b") == b"b"


def test_rename_directory(any_store):
    any_store.write_bytes("tree/x/1", b"1")
    any_store.write_bytes("tree/2", b"2")
    any_store.rename("tree", "moved")
    assert [s.path for s in any_store.walk("moved")] == ["moved/2", "moved/x/1"]
    assert not any_store.exists("tree")


def test_rename_never_merges_into_existing_directory(any_store):
    any_store.write_bytes("one/a", b"a")
    any_store.write_bytes("two/b", b"b")
    with pytest.raises(AlreadyExists):
        any_store.rename("one", "two")
    assert [s.path for s in any_store.walk("two")] == ["two/b"]
    assert [s.path for s in any_store.walk("one")] == ["one/a"]


def test_rename_missing_source(any_store):
    with pytest.raises(NotFound):
        any_store.rename("ghost", "other")


def test_create_if_absent(any_store):
    assert any_store.create_if_absent("c/once", b"1") is True
    assert any_store.create_if_absent("c/once", b"2") is False
    assert any_store.read_bytes("c/once") == b"1"


def test_write_without_overwrite(any_store):
    any_store.write_bytes("o/f", b"1")
    with pytest.raises(AlreadyExists):
        any_store.write_bytes("o/f", b"2", overwrite=False)
    any_store.write_bytes("o/f", b"3")
    assert any_store.read_bytes("o/f") == b"3"


def test_streams(any_store):
    with any_store.open_write("s/big") as f:
        f.write(b"x" * 1000)
        f.write(b"y")
    with any_store.open_read("s/big") as f:
        assert f.read() == b"x" * 1000 + b"y"


def test_copy(any_store):
    any_store.write_bytes("cp/a", b"abc")
    any_store.copy("cp/a", "cp/b")
    assert any_store.read_bytes("cp/b") == b"abc"
    assert any_store.read_bytes("cp/a") == b"abc"


def test_paths_outside_the_store_are_refused(any_store):
    for bad in ("../escape", "a/../../b", "/abs/path", "s3://bucket/key"):
        with pytest.raises(ConfigError):
            any_store.write_bytes(bad, b"x")


def test_etags_when_declared(any_store):
    any_store.write_bytes("e/f", b"1")
    st = any_store.stat("e/f")
    if any_store.capabilities.etags:
        assert st.etag
        listed = any_store.list("e")[0]
        assert listed.etag == st.etag
    if any_store.capabilities.etags_preserved_by_rename:
        any_store.rename("e/f", "e/g")
        assert any_store.stat("e/g").etag == st.etag


def test_every_operation_is_counted_and_timed(any_store):
    any_store.write_bytes("k/a", b"1")
    any_store.stat("k/a")
    any_store.list("k")
    with pytest.raises(NotFound):
        any_store.stat("k/missing")
    snap = any_store.stats.snapshot()
    assert snap["counters"]["op_create"] == 1
    assert snap["counters"]["op_get_file_status"] == 1
    assert snap["counters"]["op_get_file_status.failures"] == 1
    assert snap["counters"]["op_list_status"] == 1
    assert snap["meanstatistics"]["op_create.mean"]["samples"] == 1


def test_store_pickles_and_reopens_same_data(any_store):
    any_store.write_bytes("p/f", b"shared")
    clone = pickle.loads(pickle.dumps(any_store))
    assert clone.read_bytes("p/f") == b"shared"
    assert clone.capabilities == any_store.capabilities
    assert clone.full_url("p/f") == any_store.full_url("p/f")


def test_full_url_round_trip(any_store):
    url = any_store.full_url("x/y.parquet")
    assert any_store.relative_path(url) == "x/y.parquet"
    with pytest.raises(ConfigError):
        any_store.relative_path("elsewhere://nope/x")


def test_append(any_store):
    any_store.append_bytes("ap/log", b"one\n")
    any_store.append_bytes("ap/log", b"two\n")
    assert any_store.read_bytes("ap/log") == b"one\ntwo\n"


def test_append_counts_a_whole_file_rewrite_only_where_append_is_not_native(any_store):
    any_store.append_bytes("ap/counted", b"one\n")
    any_store.append_bytes("ap/counted", b"two\n")
    rewrites = any_store.stats.counter("append_rewrites") + _inner_rewrites(any_store)
    assert rewrites == (0 if any_store.capabilities.native_append else 2)


def _inner_rewrites(store) -> int:
    inner = getattr(store, "inner", None)
    return 0 if inner is None else inner.stats.counter("append_rewrites") + _inner_rewrites(inner)


def test_positional_writes_in_place_or_refused(any_store):
    any_store.write_bytes("pw/f", b"abcdef")
    if not any_store.capabilities.native_positional_write:
        with pytest.raises(ConfigError, match="positional"):
            any_store.write_at("pw/f", 2, b"XY")
        with pytest.raises(ConfigError, match="positional"):
            any_store.truncate("pw/f", 1)
        assert any_store.read_bytes("pw/f") == b"abcdef"  # nothing was rewritten
        return
    any_store.write_at("pw/f", 2, b"XY")
    any_store.write_at("pw/f", 8, b"!")
    assert any_store.read_bytes("pw/f") == b"abXYef\0\0!"
    any_store.truncate("pw/f", 4)
    assert any_store.read_bytes("pw/f") == b"abXY"


# --- record caps, whole-file atomicity and links (every store; links where files are local) ---


def test_read_cap_refuses_a_larger_file_naming_both_sizes(any_store):
    from dataferry.errors import RecordTooLarge

    any_store.write_bytes("cap/rec", b"x" * 100)
    assert any_store.read_bytes("cap/rec", max_bytes=100) == b"x" * 100
    assert any_store.read_bytes("cap/rec", max_bytes=None) == b"x" * 100
    with pytest.raises(RecordTooLarge) as e:
        any_store.read_bytes("cap/rec", max_bytes=99)
    assert any_store.full_url("cap/rec") in str(e.value)
    assert "100" in str(e.value) and "99" in str(e.value)
    assert (e.value.size, e.value.max_bytes) == (100, 99)
    with pytest.raises(NotFound):
        any_store.read_bytes("cap/missing", max_bytes=10)
    with pytest.raises(ConfigError):
        any_store.read_bytes("cap/rec", max_bytes=-1)


def test_a_failed_stream_publishes_nothing(any_store):
    any_store.write_bytes("fs/old", b"old")
    for path in ("fs/old", "fs/new"):
        with pytest.raises(RuntimeError), any_store.open_write(path) as f:
            f.write(b"partial " * 1000)
            raise RuntimeError("the writer died")
    assert any_store.read_bytes("fs/old") == b"old"
    assert not any_store.exists("fs/new")
    assert [s.path for s in any_store.walk("fs")] == ["fs/old"]  # no temporary name is left


def test_whole_file_writes_leave_no_temporary_name(any_store):
    from dataferry.store import paths

    any_store.write_bytes("t/a", b"1")
    any_store.write_bytes("t/a", b"2")
    any_store.create_if_absent("t/b", b"3")
    assert any_store.create_if_absent("t/b", b"4") is False
    with any_store.open_write("t/c") as f:
        f.write(b"5")
    any_store.copy("t/a", "t/d")
    names = [s.path for s in any_store.walk("t")]
    assert names == ["t/a", "t/b", "t/c", "t/d"]
    assert not any(paths.is_temporary(n) for n in names)


def _local_dir(store):
    """The local directory under a store (through wrappers and sub-stores), or None."""
    from dataferry.store.fsspec.store import FsspecStore
    from dataferry.store.local.store import LocalStore
    from dataferry.store.substore import SubStore

    if isinstance(store, LocalStore):
        return store._real
    if isinstance(store, FsspecStore):
        return store.root if store._local else None
    inner = getattr(store, "inner", None)
    if inner is None:
        return None
    below = _local_dir(inner)
    if below is not None and isinstance(store, SubStore):
        return f"{below}/{store.prefix}"
    return below


def _linked(store):
    """(store, its directory, an outside directory with files, beside the store's directory)
    for stores over local files; the others have no links (skipped)."""
    import os
    import uuid
    from pathlib import Path

    root = _local_dir(store)
    if root is None:
        pytest.skip("no local directory under this store: it has no symbolic links")
    os.makedirs(root, exist_ok=True)
    outside = Path(root).parent / f"outside-{uuid.uuid4().hex[:8]}"
    (outside / "sub").mkdir(parents=True)
    (outside / "a").write_bytes(b"outside a")
    (outside / "sub" / "b").write_bytes(b"outside b")
    return store, root, outside


def _snapshot(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _refused(store, link, fn, *args):
    from dataferry.errors import LinkRefused

    with pytest.raises(LinkRefused) as e:
        fn(*args)
    assert store.full_url(link) in str(e.value), str(e.value)


def test_a_linked_temporary_directory_is_refused_and_its_target_untouched(any_store):
    import os

    store, root, outside = _linked(any_store)
    before = _snapshot(outside)
    os.symlink(outside, f"{root}/_temporary")
    link = "_temporary"
    _refused(store, link, store.write_bytes, "_temporary/0/task/f", b"x")
    _refused(store, link, store.create_if_absent, "_temporary/x", b"x")
    _refused(store, link, store.append_bytes, "_temporary/a", b"x")
    _refused(store, link, store.mkdirs, "_temporary/0")
    _refused(store, link, store.read_bytes, "_temporary/a")
    _refused(store, link, store.stat, "_temporary/a")
    _refused(store, link, store.list, "_temporary")
    _refused(store, link, store.list, "_temporary/sub")
    _refused(store, link, store.walk, "_temporary")
    _refused(store, link, store.delete, "_temporary", True)
    _refused(store, link, store.delete, "_temporary/sub", True)
    _refused(store, link, store.delete, "_temporary/a")
    _refused(store, link, store.rename, "_temporary/a", "stolen")
    _refused(store, link, store.copy, "_temporary/a", "copied")
    with pytest.raises(StoreError), store.open_write("_temporary/s") as f:
        f.write(b"x")
    assert _snapshot(outside) == before
    assert sorted(os.listdir(outside)) == ["a", "sub"]
    (entry,) = store.list("")
    assert (entry.path, entry.is_link, entry.is_dir) == ("_temporary", True, False)
    assert [s.path for s in store.walk("")] == ["_temporary"]  # listed as itself, not entered
    assert store.stat("_temporary").is_link  # a link is answered as itself
    assert not store.exists("stolen") and not store.exists("copied")


def test_a_linked_partition_directory_is_never_written_through(any_store):
    import os

    store, root, outside = _linked(any_store)
    before = _snapshot(outside)
    os.makedirs(f"{root}/out")
    os.symlink(outside, f"{root}/out/part=1")
    link = "out/part=1"
    _refused(store, link, store.write_bytes, "out/part=1/f.parquet", b"x")
    _refused(store, link, store.write_bytes, "out/part=1/a", b"overwritten?")
    _refused(store, link, store.append_bytes, "out/part=1/a", b"appended?")
    _refused(store, link, store.create_if_absent, "out/part=1/g", b"x")
    _refused(store, link, store.mkdirs, "out/part=1/deeper")
    _refused(store, link, store.write_bytes, "out/part=1/sub/b", b"x")
    if store.capabilities.native_positional_write:
        _refused(store, link, store.write_at, "out/part=1/a", 0, b"X")
        _refused(store, link, store.truncate, "out/part=1/a", 0)
    assert _snapshot(outside) == before
    store.write_bytes("out/part=2/f.parquet", b"fine")  # a real directory beside it
    assert store.read_bytes("out/part=2/f.parquet") == b"fine"


def test_a_linked_parent_of_a_rename_destination_is_refused(any_store):
    import os

    store, root, outside = _linked(any_store)
    before = _snapshot(outside)
    store.write_bytes("src/f", b"data")
    store.write_bytes("src/dir/g", b"more")
    os.symlink(outside, f"{root}/dst")
    _refused(store, "dst", store.rename, "src/f", "dst/f")
    _refused(store, "dst", store.rename, "src/dir", "dst/dir")
    _refused(store, "dst", store.rename, "src/f", "dst/sub/f")
    _refused(store, "dst", store.rename, "dst", "moved")  # the link itself is not moved
    assert store.read_bytes("src/f") == b"data"
    assert store.read_bytes("src/dir/g") == b"more"
    assert _snapshot(outside) == before


def test_a_recursive_delete_removes_links_never_their_targets(any_store):
    import os

    store, root, outside = _linked(any_store)
    before = _snapshot(outside)
    store.write_bytes("tree/real", b"1")
    store.write_bytes("tree/sub/real", b"2")
    os.symlink(outside, f"{root}/tree/sub/to_dir")
    os.symlink(outside / "a", f"{root}/tree/to_file")
    os.symlink(outside / "sub", f"{root}/tree/to_sub")
    assert store.delete("tree", recursive=True) is True
    assert not store.exists("tree")
    assert _snapshot(outside) == before  # byte for byte
