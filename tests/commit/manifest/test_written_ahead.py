"""Where a store's closes are slow (HDFS: `slow_close`), the manifest committer's job commit
writes its entries and the intent of the plan it guesses ahead, beside the claim, and renames
that intent into place once the plan agrees (`commit/job/ahead.py`)."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from dataferry.commit.records.claim import CLAIM_FILE
from dataferry.commit.records.intent import INTENT_FILE, STAGED_INTENT
from dataferry.store import WrappingStore, open_store

from ..helpers import run_tasks, visible
from .helpers import new_job


class _SlowCloses(WrappingStore):
    """A local directory declared to close slowly; it notes the intent's writes and renames,
    and holds the claim's create until the staged intent is written (or 5 s went by)."""

    def __init__(self, inner):
        super().__init__(inner, dataclasses.replace(inner.capabilities, slow_close=True))
        self.staged = threading.Event()
        self.claim_waited = False
        self.events: list[tuple[str, str]] = []

    def _write(self, path, data, overwrite):
        super()._write(path, data, overwrite)
        if path.endswith(STAGED_INTENT):
            self.events.append(("stage", path))
            self.staged.set()
        elif path.endswith(INTENT_FILE):
            self.events.append(("write", path))

    def _rename(self, src, dst):
        super()._rename(src, dst)
        if dst.endswith(INTENT_FILE):
            self.events.append(("rename", f"{src} -> {dst}"))

    def _create_if_absent(self, path, data):
        if path == CLAIM_FILE:
            self.claim_waited = self.staged.wait(5.0)
        return super()._create_if_absent(path, data)


TASKS = {0: ["p=1/a", "p=2/b"], 1: ["p=1/c", "top"]}


@pytest.mark.parametrize("threads", [1, 8])
def test_the_intent_written_ahead_is_renamed_into_place(tmp_path, threads):
    """The intent is written while the claim is being taken and renamed into place (one call
    on the NameNode) instead of written after it (half a second on HDFS). Were the staged
    record ignored, every HDFS job commit would wait for one more close; were it written only
    once the claim is held, the claim's close and the intent's would add up again."""
    store = _SlowCloses(open_store(str(tmp_path / "out")))
    c, job = new_job(store, io_threads=threads)
    c.commit_job(job, run_tasks(c, job, TASKS))
    assert visible(store) == ["p=1/a", "p=1/c", "p=2/b", "top"]
    assert store.claim_waited, "the claim was taken before the intent was written ahead"
    kinds = [k for k, _ in store.events]
    assert kinds == ["stage", "rename"], store.events
    assert not store.exists("_temporary") and not store.exists("_dataferry")


def test_a_plan_other_than_the_guess_writes_its_own_intent(tmp_path):
    """The guess is that nothing in the destination is replaced; an overwrite of earlier data
    decides otherwise, and its intent (naming what it replaces) is written afresh, never the
    staged guess: recovering from the guess would keep the earlier data beside the new."""
    store = _SlowCloses(open_store(str(tmp_path / "out")))
    store.inner.write_bytes("old/part-0", b"earlier")
    c, job = new_job(store, io_threads=8, mode="overwrite")
    c.commit_job(job, run_tasks(c, job, TASKS))
    assert visible(store) == ["p=1/a", "p=1/c", "p=2/b", "top"]
    assert [k for k, _ in store.events] == ["stage", "write"], store.events
    assert not store.exists("_temporary")


def test_a_store_that_closes_fast_writes_nothing_ahead(tmp_path):
    """Local disk closes at once: the commit is the plain one (claim, plan, intent)."""
    store = _SlowCloses(open_store(str(tmp_path / "out")))
    store.capabilities = dataclasses.replace(store.capabilities, slow_close=False)
    store.staged.set()  # nothing to wait for
    c, job = new_job(store, io_threads=8)
    c.commit_job(job, run_tasks(c, job, TASKS))
    assert [k for k, _ in store.events] == ["write"], store.events
    assert visible(store) == ["p=1/a", "p=1/c", "p=2/b", "top"]


class _SlowAttemptDeletes(WrappingStore):
    """Deleting a task attempt's directory takes a while (a NameNode's recursive delete on a
    busy machine); notes which thread did each."""

    def __init__(self, inner):
        super().__init__(inner)
        self.deleted_by: list[str] = []

    def _delete(self, path, recursive):
        if "/tasks/attempt_" in path and path.count("/") == 4:
            time.sleep(0.05)
            self.deleted_by.append(threading.current_thread().name)
        return super()._delete(path, recursive)


def test_the_renames_do_not_wait_for_the_attempt_sweeper(tmp_path):
    """The attempt directories the sweeper has not begun to delete when the renames end are
    the cleanup stage's, deleted on the whole pool: were the rename stage to wait for its one
    sweeper thread, a commit on HDFS would wait for a hundred recursive deletes in turn."""
    store = _SlowAttemptDeletes(open_store(str(tmp_path / "out")))
    c, job = new_job(store, io_threads=8)
    c.commit_job(job, run_tasks(c, job, {t: [f"p={t % 3}/f{t}"] for t in range(20)}))
    assert len(visible(store)) == 20 and not store.exists("_temporary")
    assert len(store.deleted_by) == 20
    assert any(name.startswith("dataferry-io") for name in store.deleted_by), store.deleted_by
