"""Directories that several jobs share (`_dataferry/` and its `drivers/`): jobs remove them
once empty (`delete_if_empty`) while other jobs write records into them. A write whose new
parent another job removed meanwhile is made again, parents included; a delete of an empty
directory never takes along a file written after it looked (before, a racing job's claim
could vanish under it). Every kind of store over a local directory (`make`, conftest.py)."""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from dataferry.errors import NotADirectory, NotFound
from dataferry.store import FaultRule, Op, fault_layer, open_store
from dataferry.store.fsspec.store import FsspecStore
from dataferry.store.local import files as localfiles


def test_a_delete_of_an_empty_directory_keeps_a_file_written_after_its_check(
    make, tmp_path, monkeypatch
):
    """A file arrives in the directory after the delete looked at it, just before it removes
    the directory (whichever call removes it: the operating system's rmdir, the file
    system's rm or rmdir): the directory and the file stay."""
    store = make(tmp_path / "s")
    store.mkdirs("shared")
    late = tmp_path / "s" / "shared" / "claim.json"
    arrived = []

    def arriving_first(remove):
        def removal(*args, **kwargs):
            if not arrived:  # once: a recursive delete removes directories with rmdir too
                late.write_bytes(b"{}")
                arrived.append(remove)
            return remove(*args, **kwargs)

        return removal

    monkeypatch.setattr(os, "rmdir", arriving_first(os.rmdir))
    fs = getattr(store, "fs", None)
    if fs is not None:
        monkeypatch.setattr(fs, "rm", arriving_first(fs.rm))
        monkeypatch.setattr(fs, "rmdir", arriving_first(fs.rmdir))
    assert store.delete_if_empty("shared") is False
    assert arrived and late.read_bytes() == b"{}"
    assert store.read_bytes("shared/claim.json") == b"{}"


def test_a_write_is_made_again_when_its_new_parent_was_removed_meanwhile(tmp_path, monkeypatch):
    """The local store's window: the parent made, then removed (empty) by another job before
    the file's hidden temporary is created in it. The claim is written; before, the job failed
    with NotFound."""
    store = open_store(str(tmp_path / "s"))
    real_open_temp = localfiles.open_temp
    removed = []

    def removed_first(pfd, name):
        if not removed:
            os.rmdir(tmp_path / "s" / "_dataferry")
            removed.append(name)
        return real_open_temp(pfd, name)

    monkeypatch.setattr(localfiles, "open_temp", removed_first)
    assert store.create_if_absent("_dataferry/claim.json", b"mine")
    assert removed and store.read_bytes("_dataferry/claim.json") == b"mine"
    assert store.stats.counters["store_parent_removed_retried"] == 1


def test_a_parent_removed_between_its_making_and_its_check_is_made_again(tmp_path):
    """fsspec's local file system makes directories as os.makedirs does: a directory another
    job removed between the mkdir that found it and the check that it is one answers "exists".
    The write is made again and lands (before, it was refused as AlreadyExists); a file in
    the way is still refused."""
    import fsspec

    fs = fsspec.filesystem("file")
    store = FsspecStore(str(tmp_path / "s"), fs=fs)
    store.write_bytes("keep", b"k")
    real_makedirs = fs.makedirs
    raced = []

    def removed_after_its_mkdir(path, exist_ok=False):
        if not raced:
            raced.append(path)
            raise FileExistsError(errno.EEXIST, "File exists", path)  # and gone now
        return real_makedirs(path, exist_ok=exist_ok)

    fs.makedirs = removed_after_its_mkdir
    try:
        assert store.create_if_absent("_dataferry/claim.json", b"mine")
        assert raced and store.read_bytes("_dataferry/claim.json") == b"mine"
        assert store.stats.counters["store_parent_removed_retried"] == 1
        with pytest.raises(NotADirectory):
            store.write_bytes("keep/x", b"x")
    finally:
        del fs.makedirs


def test_every_write_kind_retries_a_parent_removed_meanwhile(tmp_path):
    """A store answering NotFound once (its new parent gone) to a write, an exclusive create
    and an append: each is made again and lands."""
    store = open_store(str(tmp_path / "s"), faults=[])
    refused = []

    def parent_gone_once(i, op, path):
        if path not in refused:
            refused.append(path)
            raise NotFound(f"{op.value} {path}: No such file or directory")

    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            kinds=frozenset({Op.WRITE, Op.CREATE_IF_ABSENT, Op.APPEND}),
            path_glob="d/*",
            times=-1,
            callback=parent_gone_once,
        )
    )
    store.write_bytes("d/w", b"w")
    assert store.create_if_absent("d/c", b"c")
    store.append_bytes("d/a", b"a")
    assert refused == ["d/w", "d/c", "d/a"]
    assert [store.read_bytes(p) for p in ("d/w", "d/c", "d/a")] == [b"w", b"c", b"a"]


def test_records_written_while_another_job_empties_the_directory_all_land(make, tmp_path):
    """The real race, threads against a remover of the emptied directories: every write
    and exclusive create lands (none answers NotFound) and nothing written is deleted."""
    store = make(tmp_path / "s")
    stop = time.monotonic() + 1.0
    failures: list[str] = []

    def remover():
        while time.monotonic() < stop:
            store.delete_if_empty("_dataferry/drivers")
            store.delete_if_empty("_dataferry")

    def writer(i):
        n = 0
        while time.monotonic() < stop:
            try:
                if not store.create_if_absent(f"_dataferry/claim-{i}.json", b"c"):
                    failures.append(f"claim {i} found taken")
                store.write_bytes(f"_dataferry/drivers/{i}.json", b"d")
                for p in (f"_dataferry/claim-{i}.json", f"_dataferry/drivers/{i}.json"):
                    if store.read_bytes(p) != (b"c" if "claim" in p else b"d"):
                        failures.append(f"{p} changed")
                    store.delete(p)
                n += 1
            except Exception as e:  # any error is the failure this test looks for
                failures.append(repr(e))
        assert n > 0

    threads = [threading.Thread(target=remover)]
    threads += [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
