"""Appenders that meet in one group commit: each is held after publishing its commit request
until every one has, so none leads before all requests are out (Delta's and Iceberg's tests);
and the destination's claim held by another job, which claimless appends must not wait on."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from dataferry.commit.records.claim import Claim
from dataferry.commit.records.hold import acquire_claim
from dataferry.store import open_store


@contextmanager
def claim_held_by_another_job(url: str, committer: str) -> Iterator[None]:
    """The claim of the destination at `url` held by another, live job for the block."""
    claim = Claim(job_id="job_other_0000", job_uuid="0" * 32, committer=committer, mode="append")
    held = acquire_claim(
        open_store(url), claim, wait_s=0.0, timeout_s=60.0, recover=None, heartbeat_s=1.0
    )
    try:
        yield
    finally:
        held.release()


def appenders_meeting_at_publish(
    monkeypatch: Any, publishing: ModuleType, count: int, append: Callable[[int], Any]
) -> list[str]:
    """Run `append(i)` for `count` values of i at once on threads, each held after its job
    publishes its request (`publishing.publish`, patched) until all have; the jobs' uuids.
    Raises if any append failed."""
    barrier = threading.Barrier(count)
    publish = publishing.publish

    def publish_then_meet(store, request):
        done = publish(store, request)
        barrier.wait(30)  # every request is out before anyone leads
        return done

    monkeypatch.setattr(publishing, "publish", publish_then_meet)
    return [done.run.job.job_uuid for done in on_threads(count, append, timeout_s=60)]


def on_threads(count: int, work: Callable[[int], Any], timeout_s: float = 120) -> list[Any]:
    """`work(i)` for `count` values of i, each on a thread of its own, all at once; what they
    returned (a list per call is flattened). Raises if any call failed."""
    results: list[Any] = []
    failed: list[BaseException] = []

    def run(i: int) -> None:
        try:
            done = work(i)
        except Exception as e:
            failed.append(e)
            return
        results.extend(done if isinstance(done, list) else [done])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not failed, failed
    return results
