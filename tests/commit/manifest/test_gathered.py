"""Where directories rename atomically in one call and closes are slow (HDFS), the manifest
committer's job commit gathers the files of directories new to the destination into its own
directory while the claim and the intent close, and publishes each such directory with one
rename once the intent is in place (`commit/manifest/stages/gather.py`)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.claim import CLAIM_FILE
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.errors import InjectedCrash, JobCommitError, StoreError
from dataferry.store import FaultRule, Op, WrappingStore, fault_layer, open_store

from ..helpers import run_tasks, visible
from .helpers import new_job

TASKS = {0: ["p=1/a", "p=2/q=1/b"], 1: ["p=1/c", "p=2/q=2/d", "top"]}
WRITTEN = ["p=1/a", "p=1/c", "p=2/q=1/b", "p=2/q=2/d", "top"]


class _SlowCloses(WrappingStore):
    """A local directory declared to close slowly, noting every rename in order (the intent's
    placing among them); `before_claim` runs just before the claim is taken."""

    def __init__(self, inner, before_claim=None):
        super().__init__(inner, dataclasses.replace(inner.capabilities, slow_close=True))
        self.renames: list[tuple[str, str]] = []
        self.before_claim = before_claim

    def _rename(self, src, dst):
        super()._rename(src, dst)
        self.renames.append((src, dst))

    def _create_if_absent(self, path, data):
        if path == CLAIM_FILE and self.before_claim is not None:
            self.before_claim(self.inner)
        return super()._create_if_absent(path, data)


def _intent_placed_at(renames: list[tuple[str, str]]) -> int:
    return next(i for i, (_, dst) in enumerate(renames) if dst.endswith(INTENT_FILE))


@pytest.mark.parametrize("threads", [1, 8])
def test_new_directories_are_gathered_before_the_intent_and_published_in_one_rename(
    tmp_path, threads
):
    """Every file of a new directory moves before the intent is in place, into the job's own
    directory, and each new top directory reaches the destination in one rename after it.
    Were nothing gathered, the file renames would all wait for the intent's close."""
    store = _SlowCloses(open_store(str(tmp_path / "out")))
    c, job = new_job(store, io_threads=threads)
    msgs = run_tasks(c, job, TASKS)
    result = c.commit_job(job, msgs)
    assert visible(store) == WRITTEN
    # the files published with their directories count as committed, each once
    assert result.files == 5 and result.bytes == sum(store.stat(p).size for p in WRITTEN)
    assert sorted(result.filenames) == WRITTEN
    placed = _intent_placed_at(store.renames)
    before, after = store.renames[:placed], store.renames[placed + 1 :]
    gathered = sorted(dst.split("/gathered/", 1)[1] for _, dst in before if "/gathered/" in dst)
    assert gathered == ["p=1/a", "p=1/c", "p=2/q=1/b", "p=2/q=2/d"], before
    published = sorted((src.split("/gathered/", 1)[1], dst) for src, dst in after[:2])
    assert published == [("p=1", "p=1"), ("p=2", "p=2")], after
    assert [dst for _, dst in after[2:] if not dst.startswith("_")] == ["top"]
    assert not store.exists("_temporary") and not store.exists("_dataferry")


def test_a_directory_already_in_the_destination_is_not_gathered(tmp_path):
    """Files of a directory that exists are renamed straight in, after the intent, as always
    (gathering them would cost a second rename each)."""
    store = _SlowCloses(open_store(str(tmp_path / "out")))
    store.inner.write_bytes("p=1/old", b"earlier")
    c, job = new_job(store, io_threads=8, mode="append")
    c.commit_job(job, run_tasks(c, job, TASKS))
    assert visible(store) == sorted([*WRITTEN, "p=1/old"])
    gathered = [dst for _, dst in store.renames if "/gathered/" in dst]
    assert all("/gathered/p=2/" in dst for dst in gathered) and len(gathered) == 2, gathered
    assert store.read_bytes("p=1/old") == b"earlier"


def test_a_directory_that_appears_before_the_claim_is_merged_into(tmp_path):
    """A directory guessed new but made by another job before this one held the claim keeps
    that job's file and gets this job's files beside it (never the gathered directory
    renamed inside it, nor its files lost)."""
    store = _SlowCloses(
        open_store(str(tmp_path / "out")),
        before_claim=lambda inner: inner.write_bytes("p=2/q=1/other", b"theirs"),
    )
    c, job = new_job(store, io_threads=1, mode="append")
    c.commit_job(job, run_tasks(c, job, TASKS))
    assert visible(store) == sorted([*WRITTEN, "p=2/q=1/other"])
    assert store.read_bytes("p=2/q=1/other") == b"theirs"
    assert not store.exists("_temporary")


@pytest.mark.parametrize("threads", [1, 8])
def test_a_commit_that_fails_before_its_intent_moves_the_gathered_files_back(tmp_path, threads):
    """A failure before the intent is in place (here the claim refused) changes nothing a
    reader sees, and the files go back where the manifests list them: the same commit tried
    again commits them all. Left gathered, the second try would find none of them."""
    refused = []

    def refuse_once(inner):
        if not refused:
            refused.append(True)
            raise StoreError("the claim is refused")

    store = _SlowCloses(open_store(str(tmp_path / "out")), before_claim=refuse_once)
    c, job = new_job(store, io_threads=threads)
    msgs = run_tasks(c, job, TASKS)
    with pytest.raises(JobCommitError, match="the claim is refused"):
        c.commit_job(job, msgs)
    assert visible(store) == []
    gathered = [dst for _, dst in store.renames if "/gathered/" in dst]
    assert len(gathered) == 4, store.renames  # gathered, then moved back
    assert not [p for p in store.walk(c.job_dir(job)) if "/gathered/" in p.path]
    c.commit_job(job, msgs)
    assert visible(store) == WRITTEN


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_driver_that_dies_publishing_is_rolled_forward_whole(tmp_path, when):
    """A driver that dies while publishing the gathered directories (the second not yet
    renamed, or renamed but not answered) leaves an intent; cleanup finishes from it: every
    file visible once, nothing left in the job's directory."""
    store = _SlowCloses(open_store(str(tmp_path / "out"), faults=[]))
    c, job = new_job(store, io_threads=1)
    msgs = run_tasks(c, job, TASKS)
    rule = FaultRule(
        action="crash", when=when, kinds=frozenset({Op.RENAME}), path_glob="*/gathered/p=2"
    )
    fault_layer(store).add_rule(rule)
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert visible(store) == (["p=1/a", "p=1/c"] if when == "before" else WRITTEN[:4])
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_forward, report
    assert visible(store) == WRITTEN
    assert not store.exists("_temporary") and not store.exists("_dataferry")


class _HeldGathering(_SlowCloses):
    """Holds the last file's gathering until the destination is listed under the claim (or
    5 s went by), noting whether it was."""

    def __init__(self, inner):
        super().__init__(inner)
        self.claimed = threading.Event()
        self.listed = threading.Event()
        self.held_until_listed = False

    def _create_if_absent(self, path, data):
        result = super()._create_if_absent(path, data)
        if path == CLAIM_FILE:
            self.claimed.set()
        return result

    def _list(self, path):
        ahead = threading.current_thread().name.startswith("dataferry-ahead")
        if path == "" and self.claimed.is_set() and not ahead:  # the guess lists it too
            self.listed.set()
        return super()._list(path)

    def _rename(self, src, dst):
        if dst.endswith("gathered/p=2/q=2/d"):
            self.held_until_listed = self.listed.wait(5.0)
        super()._rename(src, dst)


def test_the_checks_under_the_claim_run_while_the_files_are_gathered(tmp_path):
    """The destination's checks under the claim (files in the way, the write mode) do not
    wait for the gathering: only the intent does. Were the plan to wait for it, each of
    those checks would add its round trips after the last gathered file."""
    store = _HeldGathering(open_store(str(tmp_path / "out")))
    c, job = new_job(store, io_threads=8)
    c.commit_job(job, run_tasks(c, job, TASKS))
    assert store.held_until_listed, "the destination was listed only after the gathering"
    assert visible(store) == WRITTEN
