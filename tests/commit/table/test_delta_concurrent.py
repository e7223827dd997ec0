"""Concurrent appenders into one Delta table land side by side, never waiting on the
destination's claim: each creates its commit file with put-if-absent, a version another writer
took first is rebased (or, after a change of the table's shape, rebuilt and retried after a
jittered backoff), and the job's own `txn` found among the winners means it already landed, so
a lost answer never commits the job twice. Overwrites and schema-merging appends keep the
claim. A claimless job is fenced by its own driver record, and cleanup fences a driver it
judged dead before it reads the job's intent record, so recovery never deletes the files of an
append that lands."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.factory import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.records.claim import crashed, observe_record
from dataferry.commit.records.drivers import driver_path
from dataferry.commit.records.intent import INTENT_FILE
from dataferry.commit.table.delta.commit_info import jobs_of
from dataferry.errors import DestinationClaimed, JobCommitError
from dataferry.store import FaultRule, Op, open_store

from .group_appenders import claim_held_by_another_job, on_threads

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

APPENDERS = 4
COMMITS = 3
ROWS = 5


def data(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [f"d{i % 2}" for i in ids]})


def write(url, table: pa.Table, mode: str = "append", **options):
    return dataferry.write_dataset(
        table, url, partition_by=["day"], committer="delta", mode=mode, committer_options=options
    )


def frozen_at_intent() -> tuple[FaultRule, threading.Event, threading.Event]:
    """A fault rule that freezes a driver just before it writes its intent record, the
    event set once it is frozen, and the one that wakes it (within 60 s)."""
    frozen, wake = threading.Event(), threading.Event()

    def freeze(*_: object) -> None:
        frozen.set()
        wake.wait(60)

    rule = FaultRule(
        action="callback",
        kinds=frozenset({Op.WRITE}),
        predicate=lambda _i, _op, path: path.endswith(INTENT_FILE),
        callback=freeze,
    )
    return rule, frozen, wake


def ids_of(url: str) -> list[int]:
    return sorted(committer_by_name("delta", open_store(url)).read_rows().column("id").to_pylist())


def versions_per_job(url: str) -> Counter:
    """How many versions name each job (a group's entry names every job it carries)."""
    dt = committer_by_name("delta", open_store(url)).table()
    return Counter(j for e in dt.history() for j in jobs_of(e))


def test_concurrent_appenders_all_land_once(tmp_path):
    """APPENDERS drivers (threads, each its own committer and store, as other processes
    would be) appending at once to one table: every job's version exactly once and every row
    exactly once. Were a taken version not rebased or retried, a job would fail; were it
    retried without looking for the job's txn, one would land twice."""
    url = str(tmp_path / "t")
    write(url, data(ROWS, start=10_000))
    barrier = threading.Barrier(APPENDERS)

    def appender(index: int) -> list[str]:
        barrier.wait(60)
        return [
            write(url, data(ROWS, start=1000 * index + 100 * k)).run.job.job_uuid
            for k in range(COMMITS)
        ]

    jobs = on_threads(APPENDERS, appender)
    per_job = versions_per_job(url)
    assert {j: per_job[j] for j in jobs} == dict.fromkeys(jobs, 1)
    expected = [
        i
        for p in range(APPENDERS)
        for k in range(COMMITS)
        for i in range(1000 * p + 100 * k, 1000 * p + 100 * k + ROWS)
    ]
    assert ids_of(url) == sorted(expected + list(range(10_000, 10_000 + ROWS)))


def test_an_append_does_not_wait_on_the_claim_an_overwrite_does(tmp_path, monkeypatch):
    """With another commit holding the destination's claim, an append lands at once (were it
    to take the claim, it would wait claim_timeout_s and give way: DestinationClaimed); an
    overwrite and a schema-merging append still give way (they change what others build on)."""
    from dataferry.commit import factory

    monkeypatch.setitem(factory.make_committer.__kwdefaults__, "claim_timeout_s", 0.3)
    url = str(tmp_path / "t")
    write(url, data(3))
    with claim_held_by_another_job(url, "delta"):
        write(url, data(3, start=10))
        with pytest.raises((DestinationClaimed, JobCommitError)):
            write(url, data(3, start=20), mode="overwrite")
        with pytest.raises((DestinationClaimed, JobCommitError)):
            write(url, data(3, start=30), schema_mode="merge")
    assert ids_of(url) == [0, 1, 2, 10, 11, 12]


def test_only_a_plain_append_with_a_driver_record_goes_without_the_claim(tmp_path):
    """The claim is left out only for a Delta append with no schema change whose job has a
    driver record. Were an overwrite or a schema merge to go without it, two of them could
    each build on a table the other replaces; were a job without a record to, nothing would
    vouch for its intent record after a crash."""
    appending = make_committer("delta", str(tmp_path / "t"), mode="append")
    job = appending.new_job()
    assert appending.holds_claim(job)
    assert not appending.holds_claim(replace(job, driver_recorded=True))
    for mode, options in (("overwrite", {}), ("append", {"schema_mode": "merge"})):
        other = make_committer("delta", str(tmp_path / "t"), mode=mode, **options)
        assert other.holds_claim(replace(other.new_job(), driver_recorded=True))


def test_a_job_recovered_as_dead_does_not_commit(tmp_path, monkeypatch):
    """A claimless appender is fenced by its own driver record: once cleanup has recovered it
    (its record removed), it stops before the table commit rather than commit files that its
    recovery removed (were it not fenced, the log would name deleted files)."""
    from dataferry.commit.table.delta.committer import DeltaFormat

    url = str(tmp_path / "t")
    write(url, data(3))
    real = DeltaFormat.plan

    def plan_then_judged_dead(self, ctx, job, facts):
        found = real(self, ctx, job, facts)
        self.store.delete(driver_path(job.job_uuid))  # as cleanup removes it
        return found

    monkeypatch.setattr(DeltaFormat, "plan", plan_then_judged_dead)
    with pytest.raises(JobCommitError, match="driver record"):
        write(url, data(3, start=10))
    assert ids_of(url) == [0, 1, 2]


def _every_referenced_file_exists(url: str) -> None:
    store = open_store(url)
    referenced = committer_by_name("delta", store).referenced_files()
    assert referenced and all(store.exists(f) for f in referenced)


def test_cleanup_racing_a_frozen_driver_never_deletes_what_lands(tmp_path):
    """The driver is judged dead (by its lease, say) while it is only frozen just before its
    intent record; cleanup finds no intent and rolls the job back, and the driver wakes while
    cleanup deletes its files. Cleanup fences the driver before reading the intent, so the
    driver stops at its next check: nothing lands, and the table names no deleted file.
    Without the fence, the driver (its record still there until cleanup ends) would commit
    files cleanup is deleting: a table naming files that are gone."""
    url = str(tmp_path / "t")
    write(url, data(3))
    at_intent, frozen, wake = frozen_at_intent()
    driver_done = threading.Event()
    outcome: list[BaseException | None] = []

    def driver() -> None:
        try:
            write(open_store(url, faults=[at_intent]), data(3, start=10))
            outcome.append(None)
        except Exception as e:
            outcome.append(e)
        driver_done.set()

    thread = threading.Thread(target=driver, daemon=True)
    thread.start()
    assert frozen.wait(60)
    store = open_store(url)
    (uuid,) = [st.name[: -len(".json")] for st in store.list("_dataferry/drivers")]
    crashed.add(observe_record(store, driver_path(uuid)).claim.generation)  # judged dead

    def let_driver_go(*_: object) -> None:
        wake.set()
        driver_done.wait(60)

    at_delete = FaultRule(
        action="callback",
        kinds=frozenset({Op.DELETE}),
        path_glob="*.parquet",
        callback=let_driver_go,
    )
    report = cleanup_destination(open_store(url, faults=[at_delete]), older_than_s=0)
    thread.join(60)
    assert at_delete.fired == 1 and report.rolled_back
    assert isinstance(outcome[0], JobCommitError), outcome
    assert ids_of(url) == [0, 1, 2]
    assert versions_per_job(url)[uuid] == 0
    _every_referenced_file_exists(url)


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_driver_dead_at_its_table_commit_is_finished_once(tmp_path, when):
    """The driver dies just before or just after its commit file is created (its intent
    record written): cleanup finishes the commit from the intent, never deleting the files of
    the append (landed or about to): its rows once, every referenced file there."""
    from dataferry.errors import InjectedCrash

    url = str(tmp_path / "t")
    write(url, data(3))
    rule = FaultRule(action="crash", when=when, kinds=frozenset({Op.TABLE_COMMIT}))
    with pytest.raises(InjectedCrash):
        write(open_store(url, faults=[rule]), data(3, start=10))
    report = cleanup_destination(open_store(url), older_than_s=0)
    assert report.rolled_forward
    assert ids_of(url) == [0, 1, 2, 10, 11, 12]
    assert sorted(versions_per_job(url).values())[-1] == 1
    _every_referenced_file_exists(url)
    assert not open_store(url).exists("_dataferry/drivers")


def overwrite_inside_append(url: str, overwrite) -> FaultRule:
    """A rule on the appender's store: just before its commit file is created, another
    driver's overwrite lands (`overwrite(url)`), so the append's version is taken by it."""
    return FaultRule(
        action="callback",
        kinds=frozenset({Op.CREATE_IF_ABSENT}),
        path_glob="_delta_log/*.json",
        callback=lambda *_: overwrite(url),
    )


def test_an_append_overtaken_by_an_overwrite_brings_nothing_replaced_back(tmp_path):
    """An overwrite lands between the append's read of the table and its commit: the append
    is rebased over it and adds only its own rows; the rows the overwrite replaced stay gone
    (were the append built on what it read, with its removes or the old files, they would
    come back)."""
    url = str(tmp_path / "t")
    write(url, data(3))
    rule = overwrite_inside_append(url, lambda u: write(u, data(2, start=50), mode="overwrite"))
    write(open_store(url, faults=[rule]), data(3, start=10))
    assert rule.fired == 1
    assert ids_of(url) == [10, 11, 12, 50, 51]
    _every_referenced_file_exists(url)


def test_an_append_never_lands_on_a_schema_an_overwrite_removed(tmp_path):
    """An overwrite replacing the table's schema lands between the append's read and its
    commit: the append is rebuilt on the table as it is now, which refuses its columns, so it
    fails with TableCommitConflict, nothing of it committed and its files removed (were it
    rebased as a blind append, the table would hold files of a schema it no longer has)."""
    from dataferry.errors import TableCommitConflict

    url = str(tmp_path / "t")
    write(url, data(3))
    other = pa.table({"name": ["x", "y"], "day": ["d0", "d1"]})

    def replace_schema(u: str) -> None:
        write(u, other, mode="overwrite", schema_mode="overwrite")

    rule = overwrite_inside_append(url, replace_schema)
    with pytest.raises(TableCommitConflict):
        write(open_store(url, faults=[rule]), data(3, start=10))
    store = open_store(url)
    rows = committer_by_name("delta", store).read_rows()
    assert rows.column_names == ["name", "day"] and rows.num_rows == 2
    parquet = [st.path for st in store.walk("") if st.path.endswith(".parquet")]
    assert sorted(parquet) == sorted(committer_by_name("delta", store).referenced_files())
