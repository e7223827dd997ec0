"""Group commit of Delta appends (`commit/table/delta/group.py`): appenders committing at the
same moment share one log entry, each job's own `txn` and adds in it; a job whose commit
request is published lands whatever happens to its driver, and never twice; a job that dies
before its request is rolled back, and its driver cannot publish one later."""

from __future__ import annotations

import json
import threading

import pytest

from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.records.claim import crashed, observe_record
from dataferry.commit.records.drivers import driver_path
from dataferry.commit.table.delta import group
from dataferry.commit.table.delta.entry import read_entry
from dataferry.commit.table.delta.log import check_log
from dataferry.errors import InjectedCrash, JobCommitError
from dataferry.store import FaultRule, Op, open_store

from .group_appenders import appenders_meeting_at_publish
from .test_delta_concurrent import data, frozen_at_intent, ids_of, versions_per_job, write

pytestmark = pytest.mark.filterwarnings("ignore::Warning")

JOBS = 4


def every_referenced_file_exists(url: str) -> None:
    store = open_store(url)
    referenced = committer_by_name("delta", store).referenced_files()
    assert referenced and all(store.exists(f) for f in referenced)


def no_requests_left(url: str) -> None:
    assert not open_store(url).exists(group.GROUP_DIR)
    assert not open_store(url).exists("_dataferry")


def test_appenders_at_once_share_one_log_entry(tmp_path, monkeypatch):
    """JOBS appenders whose requests are all published before any of them leads land in ONE
    new version, each job's txn in it once and every row once. Were requests not carried,
    there would be JOBS versions (no group commit); were a carried job not to see its txn in
    the winner's entry, it would commit its files a second time."""
    url = str(tmp_path / "t")
    write(url, data(3, start=10_000))
    before = check_log(open_store(url))
    jobs = appenders_meeting_at_publish(
        monkeypatch, group, JOBS, lambda i: write(url, data(3, start=100 * i))
    )
    store = open_store(url)
    assert check_log(store) == before + 1  # one version for the JOBS jobs
    txns = [a["txn"]["appId"] for a in read_entry(store, before + 1) if "txn" in a]
    assert sorted(txns) == sorted(f"dataferry-{j}" for j in jobs)
    per_job = versions_per_job(url)
    assert {j: per_job[j] for j in jobs} == dict.fromkeys(jobs, 1)
    assert ids_of(url) == sorted(
        [*range(10_000, 10_003), *(100 * i + k for i in range(JOBS) for k in range(3))]
    )
    every_referenced_file_exists(url)
    no_requests_left(url)


def at_request(action: str, when: str, callback=None) -> FaultRule:
    return FaultRule(
        action=action,
        when=when,
        kinds=frozenset({Op.CREATE_IF_ABSENT}),
        path_glob=f"{group.GROUP_DIR}/*",
        callback=callback,
    )


def test_a_job_dead_after_its_request_lands_through_another_job(tmp_path):
    """A's driver dies just after publishing its request; B's commit carries A's files (one
    version for both); cleanup then finds A landed and deletes nothing: A's rows once, every
    file the table references there, no request left. Were requests not carried, A would land
    only by cleanup (two versions); were cleanup to roll A back, the table would name deleted
    files."""
    url = str(tmp_path / "t")
    write(url, data(3))
    before = check_log(open_store(url))
    b: list[str] = []

    def b_commits(*_: object) -> None:  # while A's driver is alive, A's request published
        b.append(write(url, data(3, start=20)).run.job.job_uuid)

    with pytest.raises(InjectedCrash):
        write(open_store(url, faults=[at_request("crash", "after", b_commits)]), data(3, start=10))
    assert check_log(open_store(url)) == before + 1
    per_job = versions_per_job(url)
    assert per_job[b[0]] == 1 and sum(per_job.values()) == 3  # the first write, and A and B in one
    report = cleanup_destination(open_store(url), older_than_s=0)
    assert report.rolled_forward and not report.rolled_back
    assert check_log(open_store(url)) == before + 1  # cleanup found A landed: no new version
    assert ids_of(url) == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    every_referenced_file_exists(url)
    no_requests_left(url)


def test_a_frozen_driver_rolled_back_publishes_no_request(tmp_path):
    """A's driver freezes just before its intent record and is judged dead; cleanup finds no
    intent and rolls A back (deleting its files); A wakes: it stops at its fence check, before
    its request. B then commits alone: the table names no deleted file. Were A to publish its
    request after its rollback, B would carry A's deleted files into the table."""
    url = str(tmp_path / "t")
    write(url, data(3))
    at_intent, frozen, wake = frozen_at_intent()
    done = threading.Event()
    outcome: list[BaseException | None] = []
    published = at_request("callback", "before", lambda *_: None)

    def driver() -> None:
        try:
            write(open_store(url, faults=[at_intent, published]), data(3, start=10))
            outcome.append(None)
        except Exception as e:
            outcome.append(e)
        done.set()

    thread = threading.Thread(target=driver, daemon=True)
    thread.start()
    assert frozen.wait(60)
    store = open_store(url)
    (uuid,) = [st.name[: -len(".json")] for st in store.list("_dataferry/drivers")]
    crashed.add(observe_record(store, driver_path(uuid)).claim.generation)  # judged dead
    report = cleanup_destination(open_store(url), older_than_s=0)
    assert report.rolled_back
    wake.set()
    assert done.wait(60)
    assert isinstance(outcome[0], JobCommitError), outcome
    assert published.fired == 0  # it never published a request
    write(url, data(3, start=20))
    assert ids_of(url) == [0, 1, 2, 20, 21, 22]
    assert versions_per_job(url)[uuid] == 0
    every_referenced_file_exists(url)


def test_a_job_whose_request_is_published_is_never_undone(tmp_path, monkeypatch):
    """A's first try publishes its request and loses every round; its next try fails with an
    error that would undo a job (TableCommitRefused: intent and files removed). With its
    request published, A is left decided instead, its files kept: the next job lands it once,
    and the table names no deleted file. Were A undone, the next job would carry A's deleted
    files into the table from the request still published."""
    from dataferry.commit.table.delta import committer

    url = str(tmp_path / "t")
    write(url, data(3))
    leads, fits = [], []
    real_fits = committer.still_fits

    def lose_every_round(store, own, build, rounds, may_carry):
        leads.append(own.app_id)
        raise group.GroupPending("lost every round")

    def refuse_after_the_first(*args):
        fits.append(1)
        if len(fits) > 1:
            raise ValueError("a final error of the transaction")
        return real_fits(*args)

    monkeypatch.setattr(group, "lead", lose_every_round)
    monkeypatch.setattr(committer, "still_fits", refuse_after_the_first)
    with pytest.raises(JobCommitError) as failed:
        write(url, data(3, start=10))
    assert "TableCommitRefused" not in type(failed.value).__name__
    assert len(leads) == 1 and open_store(url).exists(group.request_path(leads[0]))
    monkeypatch.undo()
    write(url, data(3, start=20))
    assert ids_of(url) == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    assert sorted(versions_per_job(url).values())[-1] == 1
    every_referenced_file_exists(url)
    no_requests_left(url)


def test_a_request_that_can_never_land_is_withdrawn(tmp_path, monkeypatch):
    """A's first try publishes its request and loses every round; meanwhile an overwrite
    replaces the table's schema, so A's next try is a conflict (TableCommitConflict): no
    leader can carry A's request any more (the change of shape is after its base), so it is
    withdrawn and A undone, its files removed. Were it left, every later leader would read
    it, and the destination would keep a request naming deleted files."""
    import pyarrow as pa

    from dataferry.errors import TableCommitConflict

    url = str(tmp_path / "t")
    write(url, data(3))
    real_lead = group.lead

    def overwritten_while_leading(store, own, build, rounds, may_carry):
        monkeypatch.setattr(group, "lead", real_lead)
        other = pa.table({"name": ["x", "y"], "day": ["d0", "d1"]})
        write(url, other, mode="overwrite", schema_mode="overwrite")
        raise group.GroupPending("lost every round")

    monkeypatch.setattr(group, "lead", overwritten_while_leading)
    with pytest.raises(TableCommitConflict):
        write(url, data(3, start=10))
    store = open_store(url)
    assert not store.exists(group.GROUP_DIR)
    rows = committer_by_name("delta", store).read_rows()
    assert rows.column_names == ["name", "day"] and rows.num_rows == 2
    parquet = [st.path for st in store.walk("") if st.path.endswith(".parquet")]
    assert sorted(parquet) == sorted(committer_by_name("delta", store).referenced_files())


def test_a_committer_that_read_the_table_still_pickles(tmp_path):
    """The table check_input read is kept for the group's first landed check, but a committer
    is shipped to Dask's and Ray's workers: it must pickle without it (deltalake's table does
    not pickle; were it kept in the state, every engine's Delta append would fail)."""
    import pickle

    from dataferry.commit.factory import make_committer

    url = str(tmp_path / "t")
    write(url, data(3))
    made = make_committer("delta", url, mode="append")
    made.prepare_input(data(1).schema, ["day"])
    assert made.format.checked[0] is not None
    again = pickle.loads(pickle.dumps(made))
    assert again.format.checked == (None, 0.0)


@pytest.mark.parametrize(
    "tamper", ["none", "remove", "foreign add", "another job's txn", "not vouched"]
)
def test_a_forged_request_is_not_carried(tmp_path, tamper):
    """A commit request is a file anyone who can write into the table's storage can write.
    Just after A publishes its request (A then dies), the request is rewritten: a remove of a
    committed file, an add of a file A never decided to commit (one already in the table: its
    rows twice), another job's txn (that job would take itself for landed); or a request of
    a job no claim or driver record vouches for is put beside it (A's adds under a made-up
    job: A's rows twice). B, committing meanwhile, must not carry what is forged: carried,
    the table would lose rows, show rows twice, or misreport a job. Cleanup then lands A once,
    from A's own intent record. Untampered ("none"), B carries A's request."""
    import msgspec

    url = str(tmp_path / "t")
    write(url, data(3))
    store = open_store(url)
    committed = set(committer_by_name("delta", store).referenced_files())
    add = next(a for a in read_entry(store, 0) if "add" in a)
    forged_path: list[str] = []

    def forge_then_b_commits(*_: object) -> None:
        (st,) = store.list(group.GROUP_DIR)
        request = msgspec.json.decode(store.read_bytes(st.path), type=group.Request)
        actions = list(request.actions)
        if tamper == "remove":
            actions.append({"remove": {"path": add["add"]["path"], "dataChange": True}})
        elif tamper == "foreign add":
            actions.append(add)
        elif tamper == "another job's txn":
            actions.append({"txn": {"appId": "dataferry-another-job", "version": 1}})
        forged = msgspec.structs.replace(request, actions=actions)
        if tamper == "not vouched":  # A's adds under a made-up job's txn
            made_up = [{"txn": {"appId": "dataferry-made-up", "version": 1}}]
            made_up += [a for a in actions if "add" in a]
            forged = group.Request(
                app_id="dataferry-made-up", job_uuid="made-up", base=request.base, actions=made_up
            )
        forged_path.append(group.request_path(forged.app_id))
        store.write_bytes(forged_path[0], msgspec.json.encode(forged))
        write(url, data(3, start=20))

    with pytest.raises(InjectedCrash):
        write(
            open_store(url, faults=[at_request("crash", "after", forge_then_b_commits)]),
            data(3, start=10),
        )
    carried = tamper in ("none", "not vouched")  # A's own request, as A published it
    assert ids_of(url) == [0, 1, 2, *([10, 11, 12] if carried else []), 20, 21, 22]
    assert committed <= committer_by_name("delta", store).referenced_files()
    assert store.exists(forged_path[0]) == (tamper != "none")  # not the leader's to delete
    assert not cleanup_destination(open_store(url), older_than_s=0).failed
    assert ids_of(url) == [0, 1, 2, 10, 11, 12, 20, 21, 22]  # A once, from its intent record
    assert committed <= committer_by_name("delta", store).referenced_files()
    assert not {"dataferry-another-job", "made-up"} & set(versions_per_job(url))
    every_referenced_file_exists(url)


def test_a_given_up_jobs_request_is_not_carried(tmp_path):
    """`dataferry cleanup --give-up` moves a job's directory (its intent record with it)
    aside: the operator gave up its all-or-nothing. A request of that job still published
    must not be carried by the next leader, or the job would land after all. (B's rows
    land; A's do not.)"""
    from dataferry.commit.job.giveup import give_up_entry

    url = str(tmp_path / "t")
    write(url, data(3))
    store = open_store(url)
    markers = committer_by_name("delta", store).markers_root

    def give_up_then_b_commits(*_: object) -> None:
        (st,) = store.list(group.GROUP_DIR)
        uuid = json.loads(store.read_bytes(st.path))["job_uuid"]
        assert give_up_entry(store, f"{markers}/{uuid}", "given up by the test")
        write(url, data(3, start=20))

    with pytest.raises(InjectedCrash):
        write(
            open_store(url, faults=[at_request("crash", "after", give_up_then_b_commits)]),
            data(3, start=10),
        )
    assert ids_of(url) == [0, 1, 2, 20, 21, 22]
    every_referenced_file_exists(url)
