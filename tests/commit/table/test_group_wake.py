"""A job of a group commit waits for its group's outcome woken, not polled on a long backoff
(`requests.await_withdrawal`, `transact.commit_exactly_once(pause=)`): its request's
withdrawal by a leader wakes it at once in this process, and is seen from another process by
re-reading that one record; the job then asks the table. Delta and Iceberg both wait so."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from dataferry.commit.protocol import StageContext
from dataferry.commit.table import requests, transact
from dataferry.commit.table.delta import committer as delta_committer
from dataferry.commit.table.delta import group as delta_group
from dataferry.commit.table.iceberg import committer as iceberg_committer
from dataferry.commit.table.iceberg import group as iceberg_group
from dataferry.stats import IOStatistics
from dataferry.store import open_store
from dataferry.store.pool import IOPool

from .test_delta_concurrent import write as delta_write
from .test_iceberg_group import write as iceberg_write

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

DIR = "_dataferry/test-group"
PATH = f"{DIR}/job.json"
LONG_S = 600.0  # a wait no test may reach: only the wake (or the re-read) ends it


class Watched:
    """A store whose `exists` says when the waiter has looked at its request."""

    def __init__(self, store) -> None:
        self.store, self.looked = store, threading.Event()

    def exists(self, path: str) -> bool:
        found = self.store.exists(path)
        self.looked.set()
        return found


def waiting(store, path: str, timeout_s: float = LONG_S) -> tuple[threading.Thread, list]:
    """A thread waiting for the request at `path` to be withdrawn; its answer, once it has."""
    answer: list[bool] = []
    t = threading.Thread(
        target=lambda: answer.append(requests.await_withdrawal(store, path, timeout_s)),
        daemon=True,
    )
    t.start()
    return t, answer


@pytest.fixture
def published(tmp_path):
    store = open_store(str(tmp_path / "t"))
    requests.publish(store, PATH, b"{}")
    return store


def test_a_withdrawal_in_this_process_wakes_the_waiter(published, monkeypatch):
    """The waiter re-reads its request only after an hour here: the leader's withdrawal in
    this process must wake it. Broken (no wake), it waits on for its whole timeout."""
    monkeypatch.setattr(requests, "FIRST_LOOK_S", 3600.0)
    monkeypatch.setattr(requests, "LAST_LOOK_S", 3600.0)
    watched = Watched(published)
    t, answer = waiting(watched, PATH)
    assert watched.looked.wait(30)  # it found its request published, and waits
    requests.withdraw(published, DIR, PATH)
    t.join(30)
    try:
        assert answer == [True]
    finally:
        requests._wake()  # a waiter left behind by a broken wake ends with the test


def test_a_withdrawal_by_another_process_is_seen_by_rereading_the_request(published):
    """A leader in another process removes the request (nothing here is notified): the
    waiter sees it gone at one of its re-reads. Broken (it only waits to be woken), it
    waits on for its whole timeout."""
    watched = Watched(published)
    t, answer = waiting(watched, PATH)
    assert watched.looked.wait(30)
    published.delete(PATH)  # not through `withdraw`: as another process does it
    t.join(30)
    assert answer == [True]


def test_a_request_still_published_ends_the_wait_unanswered(published):
    """No leader carried it: the wait ends at its timeout, False (the job tries again)."""
    assert requests.await_withdrawal(published, PATH, 0.01) is False
    assert published.exists(PATH)


def test_no_request_pauses_as_a_plain_sleep(tmp_path, monkeypatch):
    """A job with no request published (never, or withdrawn since its landed check) sleeps
    its backoff; False, so its next try asks the table itself."""
    slept: list[float] = []
    monkeypatch.setattr(requests.time, "sleep", slept.append)
    pause = requests.pause_for(open_store(str(tmp_path / "t")), PATH)
    assert pause(0.25) is False
    assert slept == [0.25]


def test_a_woken_job_asks_the_table_and_does_not_commit_again(tmp_path, monkeypatch):
    """A try conflicts; the job is not in the table yet; its pause is woken (a leader carried
    it), and the table now holds it: the job's result is the table's, not a commit of its
    own. Broken (the pause ignored, a sleep instead; or no look after the wake), the job
    sleeps (refused here) or commits a second time."""
    store = open_store(str(tmp_path / "t"))
    ctx = StageContext(store=store, stats=IOStatistics(), pool=IOPool(1))
    answers = iter([None, None, "carried"])  # before the first try, after it, after the wake
    commits: list[int] = []
    pauses: list[float] = []

    def commit() -> str:
        commits.append(1)
        raise RuntimeError("conflict")

    def refuse_sleep(_s: float) -> None:
        raise AssertionError("slept instead of waiting to be woken")

    monkeypatch.setattr(transact.time, "sleep", refuse_sleep)

    def pause(seconds: float) -> bool:
        pauses.append(seconds)
        return True

    result = transact.commit_exactly_once(
        ctx, "job", lambda: next(answers), commit, lambda e: True, 3, pause=pause
    )
    assert result == ("carried", False)
    assert len(commits) == 1 and len(pauses) == 1
    assert ctx.stats.counter("committer_table_commit_found_after_wait") == 1


def captured_pause(monkeypatch, module) -> list:
    """The `pause` each commit of `module`'s committer passes to commit_exactly_once."""
    seen: list = []
    real = module.commit_exactly_once

    def spy(*args, **kw):
        seen.append(kw.get("pause", args[7] if len(args) > 7 else None))
        return real(*args, **kw)

    monkeypatch.setattr(module, "commit_exactly_once", spy)
    return seen


def woken_by_own_request(monkeypatch, store, pause, path: str) -> None:
    """`pause` waits on the request at `path` (published here for the check) and is woken
    by its withdrawal."""
    requests.publish(store, path, b"{}")
    entered, wait = threading.Event(), requests.await_withdrawal

    def await_withdrawal(*args):
        entered.set()
        return wait(*args)

    monkeypatch.setattr(requests, "await_withdrawal", await_withdrawal)
    answer: list[bool] = []
    t = threading.Thread(target=lambda: answer.append(pause(LONG_S)), daemon=True)
    t.start()
    assert entered.wait(30)  # it found the request published, and waits on it
    requests.withdraw(store, path.rsplit("/", 1)[0], path)
    t.join(30)
    assert answer == [True]


def test_a_delta_append_waits_on_its_own_request(tmp_path, monkeypatch):
    """Broken (no pause passed, or one watching another path), a Delta job that lost its
    group's rounds sleeps its whole backoff although a leader carried it."""
    url = str(tmp_path / "t")
    delta_write(url, pa.table({"id": [1], "day": ["a"]}))
    seen = captured_pause(monkeypatch, delta_committer)
    done = delta_write(url, pa.table({"id": [2], "day": ["a"]}))
    (pause,) = seen
    app = f"dataferry-{done.run.job.job_uuid}"
    woken_by_own_request(monkeypatch, open_store(url), pause, delta_group.request_path(app))


def test_an_iceberg_append_waits_on_its_own_request(tmp_path, monkeypatch):
    """Broken (no pause passed, or one watching another path), an Iceberg job that lost the
    catalog's compare-and-swap sleeps its whole backoff although a leader carried it."""
    url = str(tmp_path / "t")
    iceberg_write(url, pa.table({"id": [1], "day": ["a"]}))
    seen = captured_pause(monkeypatch, iceberg_committer)
    done = iceberg_write(url, pa.table({"id": [2], "day": ["a"]}))
    (pause,) = seen
    path = iceberg_group.request_path(done.run.job.job_uuid)
    woken_by_own_request(monkeypatch, open_store(url), pause, path)
