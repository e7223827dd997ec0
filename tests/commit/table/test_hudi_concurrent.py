"""Concurrent inserts into one Hudi table land side by side, never waiting on the destination's
claim (`commit/table/hudi/instants.py`): each job's instant is reserved by an exclusive create
of its record (unique, later than every instant when taken), and completed by the
create-if-absent of its own `<instant>.commit`, whose `extraMetadata` names the job (read back
after a lost answer). Upserts and overwrites keep the claim."""

from __future__ import annotations

import threading
from dataclasses import replace

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.factory import make_committer
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.records.drivers import driver_path
from dataferry.commit.table.hudi import timeline
from dataferry.errors import DestinationClaimed, JobCommitError
from dataferry.store import FaultRule, Op, open_store

from .group_appenders import claim_held_by_another_job, on_threads

hudi = pytest.importorskip("hudi")
pytestmark = pytest.mark.filterwarnings("ignore::Warning")

APPENDERS = 4
COMMITS = 2
ROWS = 4
# inserts into a table without Hudi's metadata table (one that keeps it takes the claim:
# test_an_insert_into_a_table_keeping_the_metadata_table_takes_the_claim)
INSERT = {"table_name": "t", "record_key": "id", "operation": "insert", "metadata_table": False}


def data(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [f"d{i % 2}" for i in ids]})


def write(dest, table: pa.Table, mode: str = "append", **options):
    return dataferry.write_dataset(
        table,
        dest,
        partition_by=["day"],
        committer="hudi",
        mode=mode,
        committer_options={**INSERT, **options},
    )


def ids_of(url: str) -> list[int]:
    batches = hudi.HudiTableBuilder.from_base_uri(url).build().read()
    return sorted(pa.Table.from_batches(batches).column("id").to_pylist())


def completed(url: str) -> list[str]:
    """The completed instants' times, by hudi-rs's timeline."""
    table = hudi.HudiTableBuilder.from_base_uri(url).build()
    return [i.timestamp for i in table.get_timeline().get_completed_commits()]


def meeting_at(glob: str, barrier: threading.Barrier, missed: list[str]) -> FaultRule:
    """Hold the first store create matching `glob` until every party is there (a party
    that waited in vain is put in `missed`, and goes on)."""

    def meet(*_: object) -> None:
        try:
            barrier.wait(30)
        except threading.BrokenBarrierError:
            missed.append(glob)

    return FaultRule(
        action="callback", kinds=frozenset({Op.CREATE_IF_ABSENT}), path_glob=glob, callback=meet
    )


def test_concurrent_inserts_meet_at_their_commits_and_all_land_once(tmp_path):
    """APPENDERS drivers (threads, each its own committer and store, as processes would be)
    insert at once; each one's first job is held just before it creates its `.commit` until
    every one is there, so all of them are inside their job commits together. Every job lands
    in exactly one completed instant of its own, and every row is read once by hudi-rs. Were
    inserts to take the claim, only one job could reach its commit at a time and the meeting
    would fail; were an instant shared, a job's commit would find another's."""
    url = str(tmp_path / "t")
    write(url, data(ROWS, start=10_000))
    barrier, missed = threading.Barrier(APPENDERS), []

    def appender(index: int) -> list[str]:
        store = open_store(url, faults=[meeting_at(".hoodie/*.commit", barrier, missed)])
        return [
            write(store, data(ROWS, start=1000 * index + 100 * k)).run.job.job_uuid
            for k in range(COMMITS)
        ]

    jobs = on_threads(APPENDERS, appender)
    assert not missed  # every job was inside its commit at once
    table = committer_by_name("hudi", open_store(url))
    assert {j: table.commits_of_job(j) for j in jobs} == dict.fromkeys(jobs, 1)
    instants = completed(url)
    assert len(instants) == len(set(instants)) == APPENDERS * COMMITS + 1
    expected = [
        1000 * p + 100 * k + i
        for p in range(APPENDERS)
        for k in range(COMMITS)
        for i in range(ROWS)
    ]
    assert ids_of(url) == sorted([*expected, *range(10_000, 10_000 + ROWS)])
    assert not open_store(url).exists(".hoodie/.temp")  # nothing pending is left


def test_jobs_taking_an_instant_at_the_same_moment_get_distinct_ones(tmp_path, monkeypatch):
    """The clock stands still and APPENDERS jobs read the timeline at once: each computes the
    same next instant. The exclusive create of the instant's record gives it to one; the others
    read again and take later ones, so every job lands under an instant of its own. Were the
    instant not reserved, two jobs would share one and the second's setup or commit fail."""
    url = str(tmp_path / "t")
    write(url, data(ROWS, start=10_000))
    still = timeline.utc_now()
    monkeypatch.setattr(timeline, "utc_now", lambda: still)
    barrier, missed = threading.Barrier(APPENDERS), []

    def appender(index: int) -> str:
        rule = meeting_at(".hoodie/.temp/*/dataferry-job.json", barrier, missed)
        return write(open_store(url, faults=[rule]), data(ROWS, start=100 * index)).run.job.job_uuid

    jobs = on_threads(APPENDERS, appender)
    assert not missed  # every job read the timeline before any reserved an instant
    table = committer_by_name("hudi", open_store(url))
    assert {j: table.commits_of_job(j) for j in jobs} == dict.fromkeys(jobs, 1)
    instants = completed(url)
    assert len(set(instants)) == len(instants) == APPENDERS + 1
    assert ids_of(url) == sorted(
        [*(100 * p + i for p in range(APPENDERS) for i in range(ROWS)), *range(10_000, 10_004)]
    )


def test_only_an_insert_with_a_driver_record_goes_without_the_claim(tmp_path):
    """Inserts and bulk inserts (keyless ones too) whose job has a driver record go without
    the claim. Upserts keep it (their merge rewrites file groups another upsert may rewrite
    too), as do overwrites (they replace file groups) and jobs without a driver record."""
    dest = str(tmp_path / "t")
    keyless = {"keyless": True, "metadata_table": False}
    for options in (INSERT, {**INSERT, "operation": "bulk_insert"}, keyless):
        c = make_committer("hudi", dest, mode="append", **options)
        job = c.new_job()
        assert c.holds_claim(job) and not c.holds_claim(replace(job, driver_recorded=True))
        assert c.claimless_jobs()
    for mode, options in (
        ("append", {**INSERT, "operation": "upsert"}),
        ("append", {"table_name": "t", "record_key": "id"}),  # upsert: Hudi's default
        ("overwrite", INSERT),
        ("overwrite-partitions", INSERT),
    ):
        c = make_committer("hudi", dest, mode=mode, **options)
        assert c.holds_claim(replace(c.new_job(), driver_recorded=True)), (mode, options)
        assert not c.claimless_jobs()


def test_an_insert_into_a_table_keeping_the_metadata_table_takes_the_claim(tmp_path):
    """Hudi's metadata table is written by one job at a time (under the claim, as Hudi's own
    writers hold their lock): Hudi 0.15's log reader stops at the first block of an instant
    past the metadata table's latest completed one, so an insert whose block followed another
    job's pending one would not be listed by Spark until that job completed (or, were it
    dead, until cleanup). A new table made with the metadata table, and an existing one
    keeping it, both make inserts take the claim; a table without it does not."""

    def claims(dest: str, **options) -> bool:
        c = make_committer("hudi", dest, mode="append", **{**INSERT, **options})
        return c.holds_claim(replace(c.new_job(), driver_recorded=True))

    kept = str(tmp_path / "kept")
    assert claims(kept, metadata_table=True)  # no table yet: the job makes one keeping it
    write(kept, data(2), metadata_table=True)
    assert claims(kept) and claims(kept, metadata_table=True)  # the table's say
    bare = str(tmp_path / "bare")
    write(bare, data(2))
    assert not claims(bare, metadata_table=True)  # the table's say


def test_an_insert_does_not_wait_on_the_claim_an_upsert_does(tmp_path, monkeypatch):
    """With another commit holding the destination's claim, an insert lands at once; an
    upsert and an overwrite wait for the claim and give way (DestinationClaimed)."""
    from dataferry.commit import factory

    monkeypatch.setitem(factory.make_committer.__kwdefaults__, "claim_timeout_s", 0.3)
    url = str(tmp_path / "t")
    write(url, data(3))
    with claim_held_by_another_job(url, "hudi"):
        write(url, data(3, start=10))
        with pytest.raises((DestinationClaimed, JobCommitError)):
            write(url, data(3, start=20), operation="upsert")
        with pytest.raises((DestinationClaimed, JobCommitError)):
            write(url, data(3, start=30), mode="overwrite")
    assert ids_of(url) == [0, 1, 2, 10, 11, 12]


def test_a_job_recovered_as_dead_does_not_complete_its_instant(tmp_path, monkeypatch):
    """A claimless insert is fenced by its own driver record: once it is gone (cleanup
    recovered the job as dead), the job stops before its `.commit` rather than complete an
    instant whose files its recovery removes."""
    from dataferry.commit.table.hudi.committer import HudiFormat

    url = str(tmp_path / "t")
    write(url, data(3))
    real = HudiFormat.plan
    judged: list[str] = []

    def plan_then_judged_dead(self, ctx, job, facts):
        found = real(self, ctx, job, facts)
        judged.append(job.job_uuid)
        self.store.delete(driver_path(job.job_uuid))  # as cleanup removes it
        return found

    monkeypatch.setattr(HudiFormat, "plan", plan_then_judged_dead)
    with pytest.raises(JobCommitError):
        write(url, data(3, start=10))
    assert committer_by_name("hudi", open_store(url)).commits_of_job(judged[0]) == 0
    assert ids_of(url) == [0, 1, 2]
    assert len(completed(url)) == 1


def test_a_lost_answer_of_the_commit_is_read_back_not_made_again(tmp_path):
    """The create of the job's `.commit` lands but its answer is lost (a timeout after it
    took effect): the job reads its instant back (its id in the commit's `extraMetadata`) and
    reports committed; the instant is completed once and the rows are there once."""
    url = str(tmp_path / "t")
    write(url, data(3))
    lost = FaultRule(
        action="ambiguous",
        when="after",
        kinds=frozenset({Op.CREATE_IF_ABSENT}),
        path_glob=".hoodie/*.commit",
    )
    done = write(open_store(url, faults=[lost]), data(3, start=10))
    assert lost.fired == 1
    assert committer_by_name("hudi", open_store(url)).commits_of_job(done.run.job.job_uuid) == 1
    assert ids_of(url) == [0, 1, 2, 10, 11, 12]
    assert len(completed(url)) == 2


def test_an_instant_another_job_completed_since_the_listing_is_not_taken(tmp_path, monkeypatch):
    """A job's listing of the timeline is older than another job's whole life: that job
    reserved instant T, completed it and removed its record, so the create of T's record
    succeeds. The timeline naming T says it was taken: the record is removed and a later
    instant taken. Were the create's success trusted, two completed instants would be T."""
    from dataferry.commit.table.hudi import instants

    url = str(tmp_path / "t")
    write(url, data(3))
    (taken,) = completed(url)
    store = open_store(url)
    monkeypatch.setattr(timeline, "utc_now", lambda: timeline.parse_instant(taken))
    real = instants.timeline_instants
    listings: list[int] = []

    def stale_first(s):
        listings.append(1)
        return [] if len(listings) == 1 else real(s)  # the first listing is from before T

    monkeypatch.setattr(instants, "timeline_instants", stale_first)
    got = instants.reserve_instant(store, "f" * 32, "job_x")
    assert got > taken and len(listings) == 2
    assert not store.exists(instants.record_path(taken))  # the record at T removed again
    assert instants.record_of(store, got)["job_uuid"] == "f" * 32


def test_a_rollbacks_instant_is_reserved_as_a_jobs_is(tmp_path, monkeypatch):
    """Cleanup rolls a dead job back while another job has just reserved instant T, and the
    rollback's listing of the timeline is from before that: the rollback's instant is not T
    (its reservation loses the create), and its reservation is gone once its `.rollback` is
    made. Were the rollback's instant only computed, `T.rollback` and `T.commit` would
    share one time on the timeline."""
    from dataferry.commit.table.hudi import instants

    url = str(tmp_path / "t")
    write(url, data(3))
    store = open_store(url)
    live = instants.reserve_instant(store, "e" * 32, "job_live")  # a live job's instant
    monkeypatch.setattr(timeline, "utc_now", lambda: timeline.parse_instant(live))
    real, calls = instants.timeline_instants, []

    def stale_first(s):
        calls.append(1)
        return [i for i in real(s) if i != live] if len(calls) == 1 else real(s)

    monkeypatch.setattr(instants, "timeline_instants", stale_first)
    committer = committer_by_name("hudi", store)
    r = committer.format.fresh_instant()
    assert r > live and instants.record_of(store, live)["job_uuid"] == "e" * 32
    from dataferry.commit.table.hudi.rollback import roll_back_instant

    roll_back_instant(store, "20000101000000000", ["day=d0/gone.parquet"], 0.0, lambda: r)
    assert store.exists(f".hoodie/{r}.rollback") and not store.exists(f".hoodie/.temp/{r}")


def test_a_job_refused_at_setup_gives_its_instant_back(tmp_path):
    """A job in mode `error` into a table that exists is refused at its setup, after its
    instant was reserved: the reservation is removed, nothing of the job is left. Were it
    kept, the table would hold a job record no job will ever finish or roll back."""
    from dataferry.errors import DestinationError

    url = str(tmp_path / "t")
    write(url, data(3))
    committer = make_committer("hudi", url, mode="error", **INSERT)
    job = committer.new_job()
    assert open_store(url).exists(f".hoodie/.temp/{job.config.instant}")
    with pytest.raises(DestinationError):
        committer.setup_job(job)
    assert not open_store(url).exists(".hoodie/.temp")
    assert ids_of(url) == [0, 1, 2]


def test_a_jobs_own_instant_is_no_dead_job_to_look_for(tmp_path):
    """A job (its id given, as engines give it: no look for dead jobs when it is made) set
    up on a table no other job is writing takes no claim, not even for a look for dead jobs
    (its own reserved instant is the only one there): the claim's file is never created.
    Were the job's own reservation taken for another's, every setup would take the
    destination's claim, and a driver dying in that look would leave it behind."""
    from dataferry.ids import new_job_id

    url = str(tmp_path / "t")
    write(url, data(3))
    claims = FaultRule(
        action="callback",
        kinds=frozenset({Op.CREATE_IF_ABSENT}),
        path_glob="_dataferry/claim.json",
        callback=lambda *_: None,
        times=-1,
    )
    committer = make_committer("hudi", open_store(url, faults=[claims]), mode="append", **INSERT)
    job = committer.new_job(new_job_id())
    committer.setup_job(job)
    assert claims.fired == 0
    committer.abort_job(job)
    assert not open_store(url).exists(".hoodie/.temp")
