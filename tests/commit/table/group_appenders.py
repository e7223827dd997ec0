"""Appenders that meet in one group commit: each is held after publishing its commit request
until every one has, so none leads before all requests are out (Delta's and Iceberg's tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any


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
    jobs: list[str] = []
    failed: list[BaseException] = []

    def appender(i: int) -> None:
        try:
            jobs.append(append(i).run.job.job_uuid)
        except Exception as e:
            failed.append(e)

    threads = [threading.Thread(target=appender, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failed, failed
    return jobs
