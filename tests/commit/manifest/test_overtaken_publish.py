"""A job overtaken while it publishes stops at its next batch of renames
(`manifest/stages/rename.py`: each batch checks the job's fence before it renames)."""

from __future__ import annotations

import threading
import time

from dataferry import make_committer
from dataferry.commit.records.hold import VERIFY_EVERY_S, fence_path, read_claim
from dataferry.errors import ClaimLost
from dataferry.store import FaultRule, Op, open_store

from ..helpers import run_tasks, visible

FILES = 24


def test_a_job_overtaken_between_publish_batches_renames_nothing_after_its_next_check(tmp_path):
    """The job is held at its first rename into the destination while a taker fences its
    generation (the first step of a takeover: the taker then finishes or undoes the job's
    commit, and starts its own). Were the fence not checked per batch, the overtaken job
    would go on renaming every file it planned into a destination another process now holds:
    two processes publishing at once, and a taker that rolled back or overwrote would find
    the overtaken job's files appearing after it was done."""
    reached, release = threading.Event(), threading.Event()

    def hold(*_: object) -> None:
        reached.set()
        assert release.wait(30)

    gate = FaultRule(
        action="callback", kinds=frozenset({Op.RENAME}), path_glob="*.inflight", callback=hold
    )
    store = open_store(str(tmp_path / "d"), faults=[gate])
    c = make_committer("manifest", store, io_threads=1)
    job = c.new_job()
    c.setup_job(job)
    msgs = run_tasks(c, job, {0: [f"p=1/f{i:02d}" for i in range(FILES)]})
    out: dict = {}

    def commit() -> None:
        try:
            out["result"] = c.commit_job(job, msgs)
        except BaseException as e:
            out["error"] = e

    t = threading.Thread(target=commit)
    t.start()
    assert reached.wait(10)  # publishing its first batch
    generation = read_claim(store).generation
    assert store.create_if_absent(fence_path(generation), b"{}")  # a taker fences it
    time.sleep(VERIFY_EVERY_S + 0.1)  # (batch checks ask the store at most once a second)
    release.set()
    t.join(30)
    assert isinstance(out.get("error"), ClaimLost), out
    published = visible(store)
    batch = max(1, FILES // 8)  # one I/O thread: batches of FILES // 8 files
    assert 0 < len(published) <= batch, published  # only the batch under way finished
