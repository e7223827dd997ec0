"""One contract, every store: local, memory (fsspec), sim models and a fault wrapper."""

from __future__ import annotations

import pickle

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
