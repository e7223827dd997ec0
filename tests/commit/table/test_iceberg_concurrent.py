"""Concurrent appenders into one Iceberg table land side by side through the catalog's
compare-and-swap, never waiting on the destination's claim: a conflict is rebased on the
table as it is now and tried again after a jittered backoff, and before any retry the table's
snapshot summaries are asked for the job's id, so an answer lost after the commit landed
never commits the job twice. Overwrites keep the claim. On the SQL catalog (local disk) and
on SeaweedFS's REST catalog."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.records.claim import Claim
from dataferry.commit.records.hold import acquire_claim
from dataferry.commit.table.iceberg.catalog import jobs_of
from dataferry.errors import DestinationClaimed, JobCommitError
from dataferry.store import FaultRule, Op, open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

PROCESSES = 4
COMMITS = 2
ROWS = 7


def data(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([f"2024-01-0{1 + i % 2}" for i in ids]),
        }
    )


def sql_catalog(tmp_path) -> dict[str, str]:
    return {
        "name": "tests",
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": f"file://{tmp_path / 'warehouse'}",
    }


def append(url: str, table: pa.Table, options: dict, storage: dict | None):
    return dataferry.write_dataset(
        table,
        url,
        partition_by=["day"],
        committer="iceberg",
        mode="append",
        storage_options=storage or None,
        committer_options=options,
    )


@dataclass(frozen=True)
class Landed:
    """What one append reported: its job, the snapshot it was told holds it, its first id."""

    job_uuid: str
    snapshot_id: int
    start: int


def appender(args: tuple) -> list[Landed]:
    """One process: wait for the others, then COMMITS appends; what each reported."""
    url, options, storage, index, barrier = args
    barrier.wait(60)
    jobs = []
    for k in range(COMMITS):
        start = 1000 * index + 100 * k
        done = append(url, data(ROWS, start=start), options, storage)
        snapshot_id = done.run.commit.details["snapshot_id"]
        jobs.append(Landed(done.run.job.job_uuid, snapshot_id, start))
    return jobs


def run_appenders(url: str, options: dict, storage: dict | None) -> list[Landed]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(PROCESSES)
        with ctx.Pool(PROCESSES) as pool:
            args = [(url, options, storage, i, barrier) for i in range(PROCESSES)]
            return [j for jobs in pool.map(appender, args) for j in jobs]


def expected_ids(jobs: list[Landed]) -> list[int]:
    return sorted(i for j in jobs for i in range(j.start, j.start + ROWS))


def check_all_landed_once(tbl: Any, jobs: list[Landed]) -> None:
    assert len(jobs) == PROCESSES * COMMITS
    per_job = Counter(j for s in tbl.snapshots() for j in jobs_of(s.summary))
    assert {j.job_uuid: per_job[j.job_uuid] for j in jobs} == {j.job_uuid: 1 for j in jobs}
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == expected_ids(jobs)


def check_all_landed_once_unless_the_catalog_lost_one(tbl: Any, jobs: list[Landed]) -> None:
    """`check_all_landed_once`, but a job whose acknowledged snapshot is in none of the
    table's snapshots was lost by the catalog (dataferry never asks a catalog to remove a
    snapshot): SeaweedFS's REST catalog does this when two commits race (docs/store-models.md).
    Then every other job must still be in the table exactly once with its rows, and the test
    is an expected failure of the server, not a pass."""
    snapshot_ids = {s.snapshot_id for s in tbl.snapshots()}
    per_job = Counter(j for s in tbl.snapshots() for j in jobs_of(s.summary))
    lost = [j for j in jobs if per_job[j.job_uuid] == 0 and j.snapshot_id not in snapshot_ids]
    if not lost:
        check_all_landed_once(tbl, jobs)
        return
    kept = [j for j in jobs if j not in lost]
    assert {j.job_uuid: per_job[j.job_uuid] for j in kept} == {j.job_uuid: 1 for j in kept}
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == expected_ids(kept)
    pytest.xfail(
        f"the REST catalog acknowledged {len(lost)} commit(s) and then lost them (snapshot "
        f"{lost[0].snapshot_id}); every other job landed exactly once"
    )


def test_concurrent_appenders_all_land_once_sql_catalog(tmp_path):
    """PROCESSES processes appending at once to one table on a SQL catalog (which they create
    between them): every job's snapshot exactly once and every row exactly once. Were a
    conflict not rebased and retried, a job would fail; were it retried without asking the
    table, one would land twice."""
    url = str(tmp_path / "t")
    options = {"catalog": sql_catalog(tmp_path), "identifier": "ns.c"}
    jobs = run_appenders(url, options, None)
    check_all_landed_once(committer_by_name("iceberg", open_store(url)).table(), jobs)


@pytest.mark.xdist_group("seaweedfs")
def test_concurrent_appenders_all_land_once_rest_catalog(iceberg_rest):
    """The same on SeaweedFS's REST catalog, whose commits are compare-and-swap on the
    table's metadata; the table is created by the racing appenders themselves (one creates
    it, the others' creates conflict and are rebased into appends)."""
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    options = {"catalog": iceberg_rest.properties(), "identifier": ident}
    jobs = run_appenders(url, options, iceberg_rest.storage_options)
    check_all_landed_once_unless_the_catalog_lost_one(
        iceberg_rest.catalog().load_table(ident), jobs
    )


def hold_claim(url: str, storage: dict | None = None):
    """A live claim on the destination, as another job's commit in progress holds it."""
    store = open_store(url, storage_options=storage)
    claim = Claim(job_id="job_other_0000", job_uuid="0" * 32, committer="iceberg", mode="append")
    return acquire_claim(store, claim, wait_s=0.0, timeout_s=60.0, recover=None, heartbeat_s=1.0)


def test_an_append_does_not_wait_on_the_claim_an_overwrite_does(tmp_path, monkeypatch):
    """With another commit holding the destination's claim, an append lands at once (were it
    to take the claim, it would wait claim_timeout_s and give way: DestinationClaimed); an
    overwrite still gives way, as it must (it replaces what it read)."""
    from dataferry.commit import factory

    monkeypatch.setitem(factory.make_committer.__kwdefaults__, "claim_timeout_s", 1.0)
    url = str(tmp_path / "t")
    options = {"catalog": sql_catalog(tmp_path), "identifier": "ns.h"}
    append(url, data(3), options, None)
    held = hold_claim(url)
    try:
        append(url, data(3, start=10), options, None)
        with pytest.raises((DestinationClaimed, JobCommitError)):
            dataferry.write_dataset(
                data(3, start=20),
                url,
                partition_by=["day"],
                committer="iceberg",
                mode="overwrite",
                committer_options=options,
            )
    finally:
        held.release()
    tbl = committer_by_name("iceberg", open_store(url)).table()
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2, 10, 11, 12]


def test_a_job_recovered_as_dead_does_not_commit(tmp_path, monkeypatch):
    """An appender with no claim is fenced by its own driver record: once cleanup has judged
    it dead and recovered it (its record removed), it stops before the table commit rather
    than commit files its recovery removed (were it not fenced, the table would reference
    deleted files)."""
    from dataferry.commit.records import drivers
    from dataferry.commit.table.iceberg.committer import IcebergFormat

    url = str(tmp_path / "t")
    options = {"catalog": sql_catalog(tmp_path), "identifier": "ns.z"}
    append(url, data(3), options, None)
    real = IcebergFormat.plan

    def plan_then_judged_dead(self, ctx, job, facts):
        found = real(self, ctx, job, facts)
        self.store.delete(drivers.driver_path(job.job_uuid))  # as cleanup removes it
        return found

    monkeypatch.setattr(IcebergFormat, "plan", plan_then_judged_dead)
    with pytest.raises(JobCommitError, match="driver record"):
        append(url, data(3, start=10), options, None)
    tbl = committer_by_name("iceberg", open_store(url)).table()
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == [0, 1, 2]


ANSWERS = ["conflict", "timeout", "error"]


def lost_answer(answer: str) -> FaultRule:
    """The catalog commit lands, then its answer is lost: a conflict, a timeout, an error."""
    kinds = frozenset({Op.TABLE_COMMIT})
    if answer == "timeout":
        return FaultRule(action="ambiguous", when="after", kinds=kinds)
    if answer == "error":
        return FaultRule(action="fail", when="after", kinds=kinds)

    def lost_race(*_: object) -> None:
        from pyiceberg.exceptions import CommitFailedException

        raise CommitFailedException("injected: the answer of a commit that landed")

    return FaultRule(action="callback", when="after", kinds=kinds, callback=lost_race)


@pytest.mark.xdist_group("seaweedfs")
@pytest.mark.parametrize("answer", ANSWERS)
def test_a_lost_answer_is_not_committed_twice_rest_catalog(iceberg_rest, answer):
    """The REST catalog took the append, its answer was lost: the job's id is found in the
    table's snapshot summaries before any retry, so the job is one snapshot, its rows once
    (were the table not asked, a conflict answer would be retried: every row twice)."""
    url, ident = iceberg_rest.url(), iceberg_rest.identifier()
    options = {"catalog": iceberg_rest.properties(), "identifier": ident}
    storage = iceberg_rest.storage_options
    append(url, data(4), options, storage)
    rule = lost_answer(answer)
    store = open_store(url, storage_options=storage, faults=[rule])
    done = dataferry.write_dataset(
        data(4, start=50),
        store,
        partition_by=["day"],
        committer="iceberg",
        mode="append",
        committer_options=options,
    )
    assert rule.fired == 1
    tbl = iceberg_rest.catalog().load_table(ident)
    per_job = Counter(j for s in tbl.snapshots() for j in jobs_of(s.summary))
    assert per_job[done.run.job.job_uuid] == 1
    ids = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    assert ids == [0, 1, 2, 3, 50, 51, 52, 53]


def test_only_an_append_with_a_driver_record_goes_without_the_claim(tmp_path):
    """The claim is left out only for an Iceberg append whose job has a driver record (its
    fence, and what vouches for its intent record after a crash). Were a job driven through
    the hooks alone (no record) to go without it, a crash after its intent record would leave
    a commit nothing vouches for, never finished; were an overwrite to, it could replace what
    another commit just added; a schema merge keeps it as an overwrite does."""
    from dataclasses import replace

    from dataferry.commit.factory import make_committer

    options = {"catalog": sql_catalog(tmp_path), "identifier": "ns.k"}
    appending = make_committer("iceberg", str(tmp_path / "t"), mode="append", **options)
    job = appending.new_job()
    assert appending.holds_claim(job)  # no driver record
    assert not appending.holds_claim(replace(job, driver_recorded=True))
    overwriting = make_committer("iceberg", str(tmp_path / "t"), mode="overwrite", **options)
    assert overwriting.holds_claim(replace(overwriting.new_job(), driver_recorded=True))
    merging = make_committer("iceberg", str(tmp_path / "t"), schema_mode="merge", **options)
    assert merging.holds_claim(replace(merging.new_job(), driver_recorded=True))
