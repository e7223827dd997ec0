"""Where each store call is a server's round trip (`remote_calls`) and a recursive delete is
one request the server carries out whole (`tree_delete`: HDFS's NameNode), the manifest
committer's job commit leaves out the calls it does not need: no inline sample before the
parallel work, no attempt-by-attempt deletes, one check of the entries file, and the hidden
`_SUCCESS` written while the claim is checked. Each test fails with that cut undone."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from dataferry.commit.job.stages import save_success
from dataferry.commit.manifest.carried import CARRIED
from dataferry.commit.manifest.committer import ENTRIES_NAME
from dataferry.commit.protocol import StageContext
from dataferry.errors import ClaimLost
from dataferry.store import IOPool, WrappingStore, open_store

from ..helpers import run_tasks, visible
from .helpers import new_job


class _NameNodeLike(WrappingStore):
    """A local directory declared as HDFS declares itself; it notes each call (op, path,
    recursive, thread)."""

    def __init__(self, inner, **caps):
        caps = {"remote_calls": True, "tree_delete": True, **caps}
        super().__init__(inner, dataclasses.replace(inner.capabilities, **caps))
        self.calls: list[tuple[str, str, bool, str]] = []
        self._lock = threading.Lock()

    def _note(self, op, path, recursive=False):
        with self._lock:
            self.calls.append((op, path, recursive, threading.current_thread().name))

    def _delete(self, path, recursive):
        self._note("delete", path, recursive)
        return super()._delete(path, recursive)

    def _list(self, path):
        self._note("list", path)
        return super()._list(path)

    def _stat(self, path):
        self._note("stat", path)
        return super()._stat(path)

    def open_read(self, path):
        self._note("open", path)
        return super().open_read(path)

    def _read(self, path, max_bytes=None):
        self._note("read", path)
        return super()._read(path, max_bytes)

    def _rename(self, src, dst):
        self._note("rename", dst)
        super()._rename(src, dst)

    def _write(self, path, data, overwrite):
        self._note("write", path)
        super()._write(path, data, overwrite)

    def of(self, op):
        return [c for c in self.calls if c[0] == op]


TASKS = {t: [f"p={t % 3}/f{t}-{i}" for i in range(3)] for t in range(8)}


def _commit(store, threads=8, carried=True):
    """Commit TASKS' files; `carried=False`: the messages without their manifests' copies
    (as for manifests too large to carry), so that the job commit reads them."""
    c, job = new_job(store, io_threads=threads)
    messages = run_tasks(c, job, TASKS)
    if not carried:
        messages = [
            dataclasses.replace(m, extra={k: v for k, v in m.extra.items() if k != CARRIED})
            for m in messages
        ]
    store.calls.clear()
    result = c.commit_job(job, messages)
    assert len(visible(store)) == 24 and not store.exists("_temporary")
    return result, job


@pytest.mark.parametrize("threads", [1, 8])
def test_the_job_directory_goes_in_one_recursive_delete(tmp_path, threads):
    """No attempt directory is deleted on its own (not beside the renames, not in cleanup)
    and the attempts are not listed: the job's directory is one recursive delete. Were the
    attempts swept, eight more deletes would queue on the NameNode's lock beside the renames."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    result, job = _commit(store, threads)
    pending = [c for c in store.of("delete") if c[1].startswith("_temporary")]
    assert [(p, r) for _, p, r, _ in pending] == [
        (f"_temporary/{job.job_uuid}", True),
        ("_temporary", False),
    ], pending
    assert not [c for c in store.of("list") if "/tasks" in c[1]], store.of("list")
    assert result.details["cleanup"] == "deleted"


def test_a_store_without_tree_deletes_still_deletes_attempt_by_attempt(tmp_path):
    """Elsewhere (object stores, where one recursive delete of a large tree can time out)
    each attempt's directory is deleted on its own, as before."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")), tree_delete=False)
    _commit(store)
    attempts = [c for c in store.of("delete") if "/tasks/attempt_" in c[1]]
    assert len(attempts) == len(TASKS), store.of("delete")


def test_manifests_carried_in_the_messages_are_not_read_back(tmp_path):
    """Each task's message carries its (small) manifest: the job commit reads none of the
    saved ones (on HDFS each is a DataNode read on the commit's path), and commits the same."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    result, _ = _commit(store)
    assert not [c for c in store.of("read") if c[1].endswith("-manifest.json")]
    assert result.iostatistics.counter("committer_task_manifests_carried") == len(TASKS)


def test_the_manifests_are_loaded_in_parallel_from_the_first(tmp_path):
    """Every manifest not carried in its message is read on the I/O pool's threads, none on
    the committing thread: the pool does not first read them one at a time to see whether
    threads pay off."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    _commit(store, carried=False)
    reads = [c for c in store.of("read") if c[1].endswith("-manifest.json")]
    assert len(reads) == len(TASKS)
    assert all(c[3].startswith("dataferry-io") for c in reads), reads


def test_the_entries_file_is_checked_once_before_the_renames(tmp_path):
    """The entries file's size is checked once (the intent's check) before the files move,
    not again when the stage builds its plan and when the renames begin to read it."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    _commit(store, threads=1)
    first_move = next(i for i, c in enumerate(store.calls) if c[0] == "rename" and "/f" in c[1])
    stats = [c for c in store.calls[:first_move] if c[0] == "stat" and c[1].endswith(ENTRIES_NAME)]
    assert len(stats) == 1, stats


def _ctx(store, fence):
    return StageContext(store=store, pool=IOPool(4), fence=fence)


def test_success_is_published_only_after_the_claim_check(tmp_path):
    """The hidden `_SUCCESS.tmp` is written beside the claim's check, and `_SUCCESS` is put
    in place only once the check has passed."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    checked = threading.Event()

    def fence(step, strict=True):
        checked.set()
        store._note("fence", step)

    ctx = _ctx(store, fence)
    try:
        save_success(ctx, "_temporary/j/00", b'{"success": true}')
    finally:
        ctx.close()
    assert store.read_bytes("_SUCCESS") == b'{"success": true}'
    ops = [c[0] for c in store.calls]
    assert ops.index("fence") < ops.index("rename", ops.index("write") + 1), store.calls


def _save_success_with_the_claim_lost(store) -> None:
    """`save_success` into `_temporary/j/00` by a job whose claim check says it was taken over."""

    def lost(step, strict=True):
        raise ClaimLost("taken over")

    ctx = _ctx(store, lost)
    try:
        with pytest.raises(ClaimLost):
            save_success(ctx, "_temporary/j/00", b"ours")
    finally:
        ctx.close()


def test_a_lost_claim_publishes_no_success(tmp_path):
    """A job that lost its claim stops before `_SUCCESS` changes: the one there stays."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    store.write_bytes("_SUCCESS", b"earlier")
    _save_success_with_the_claim_lost(store)
    assert store.read_bytes("_SUCCESS") == b"earlier"


def test_an_overtaken_holders_hidden_success_copy_is_taken_back(tmp_path):
    """The hidden copy is written beside the claim's check: a holder overtaken meanwhile
    has written it (making the job's directories again, which its taker may have removed
    by then) when the check fails. It deletes its own copy and the hidden directories left
    empty, and nothing else: a taker's copy of the same job, written beside it, stays."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    _save_success_with_the_claim_lost(store)
    assert not store.exists("_temporary"), store.walk("")

    taker = "_temporary/j/00/_SUCCESS.0123456789abcdef0123456789abcdef.tmp"
    store.write_bytes(taker, b"taker")
    _save_success_with_the_claim_lost(store)
    assert [s.path for s in store.walk("")] == [taker]


def test_the_emptied_records_directory_is_listed_once(tmp_path):
    """Releasing the claim and ending the driver record remove `_dataferry` once between
    them: each of its directories is listed once, not once by each."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    _commit(store)
    lists = [c[1] for c in store.of("list") if c[1].startswith("_dataferry")]
    assert sorted(lists) == ["_dataferry", "_dataferry/drivers"], lists
    assert not store.exists("_dataferry")


@pytest.mark.parametrize("threads", [1, 8])
def test_the_renames_read_the_entries_kept_not_the_file(tmp_path, threads):
    """The process that wrote the entries file renames from the lines it kept as it wrote
    them: the file is not read back (on HDFS an open at the NameNode and a read from a
    DataNode before the first rename)."""
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    _commit(store, threads)
    assert not [c for c in store.of("read") if c[1].endswith(ENTRIES_NAME)], store.of("read")
    assert not [c for c in store.of("open") if c[1].endswith(ENTRIES_NAME)]


def test_entries_beyond_the_kept_size_are_read_back_from_the_file(tmp_path, monkeypatch):
    """A job whose entries outgrow what is kept reads them back from its entries file, as a
    commit finished from its record does."""
    from dataferry.commit.manifest.stages import load

    monkeypatch.setattr(load, "KEEP_ENTRIES_BYTES", 100)
    store = _NameNodeLike(open_store(str(tmp_path / "out")))
    _commit(store)
    assert [c for c in store.of("open") if c[1].endswith(ENTRIES_NAME)]
