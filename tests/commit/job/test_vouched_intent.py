"""Recovery finishes a decided intent record only when a real driver vouches for it
(`commit/job/vouch.py`): the same record, written by a job whose driver died just after it,
is rolled forward while the destination's claim or the job's driver record names the job, and
left in place with nothing deleted once neither does (what a forger who writes only the job's
directory leaves). One committer of each family: plain files (`direct`), renames (`v1`,
`manifest`; `directory`, `partitioned` on simulated S3), uploads (`magic`), tables (`delta`).

Broken, `dataferry cleanup` (or the next job) would finish a forged overwrite record and delete
every committed file it lists; or would leave a real dead driver's decided commit unfinished."""

from __future__ import annotations

import pytest

from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.claim import CLAIM_FILE
from dataferry.commit.records.drivers import driver_path
from dataferry.errors import DataferryError, InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store
from dataferry.verify import invariants as inv
from dataferry.verify import tables
from dataferry.verify.harness import (
    ScenarioStores,
    deterministic_options,
    quiet_store,
    run_reference,
)

FAMILIES = {
    "direct": None,
    "v1": None,
    "manifest": None,
    "directory": "sim:s3",
    "partitioned": "sim:s3",
    "magic": "sim:s3",
    "delta": None,
}


@pytest.fixture
def stores(request):
    """(the committer, fresh destinations on its store); a table is read as its format's."""
    if request.param == "delta":
        pytest.importorskip("deltalake")
    s = ScenarioStores(FAMILIES[request.param])
    with tables.read_as(request.param, deterministic_options(request.param)):
        yield request.param, s
    s.close()


def dead_after_intent(committer: str, stores: ScenarioStores) -> tuple[str, str, inv.Snapshot]:
    """A committed data set, then an `overwrite` job whose driver dies right after writing its
    intent record: (the destination, the dead job's uuid, the data set as readers saw it)."""
    url = stores.url(committer)
    options = deterministic_options(committer)
    assert run_reference(committer, quiet_store(url), "append", options).committed
    earlier = inv.snapshot(quiet_store(url))
    crash = FaultRule(
        action="crash", when="after", kinds=frozenset({Op.WRITE}), path_glob="*_commit_intent.json"
    )
    with pytest.raises(InjectedCrash) as died:
        run_reference(
            committer, open_store(url, faults=[crash], latency_scale=0.0), "overwrite", options
        )
    return url, died.value.outcome.job_uuid, earlier


def forget_the_driver(url: str, job_uuid: str) -> None:
    """Remove what a real driver wrote besides its job's directory (the claim naming its job,
    its driver record): what is left is all a forger who writes an intent record leaves."""
    store = quiet_store(url)
    store.delete(CLAIM_FILE)
    store.delete(driver_path(job_uuid))


@pytest.mark.parametrize("stores", list(FAMILIES), indirect=True)
def test_a_dead_drivers_decided_overwrite_is_finished(stores):
    committer, s = stores
    url, job_uuid, earlier = dead_after_intent(committer, s)
    report = cleanup_destination(quiet_store(url), older_than_s=0.0)
    assert report.rolled_forward and not report.failed, report
    store = quiet_store(url)
    assert inv.files_of_job(store, job_uuid, inv.visible_files(store))  # its output is there
    assert not set(earlier) & set(inv.visible_files(store))  # and the data it replaced is gone


@pytest.mark.parametrize("stores", list(FAMILIES), indirect=True)
def test_an_intent_record_no_driver_vouches_for_deletes_nothing(stores):
    committer, s = stores
    url, job_uuid, earlier = dead_after_intent(committer, s)
    forget_the_driver(url, job_uuid)
    report = cleanup_destination(quiet_store(url), older_than_s=0.0)
    assert not report.rolled_forward, report
    ((path, why),) = report.failed.items()
    assert "not vouched for" in why and "--give-up" in why
    store = quiet_store(url)
    assert inv.check_kept(store, earlier, "after cleanup") == []
    if committer != "direct":  # (whose tasks write in place: visible from the start)
        assert not inv.files_of_job(store, job_uuid, inv.visible_files(store))  # none moved in
    # the operator's way out: the record is moved aside, and still nothing is deleted
    report = cleanup_destination(store, older_than_s=0.0, give_up=[path])
    assert path in report.given_up and not report.failed, report
    assert inv.check_kept(store, earlier, "after giving it up") == []


@pytest.mark.parametrize("stores", ["direct"], indirect=True)
def test_the_driver_record_alone_vouches_and_is_kept_while_the_commit_is_left(stores):
    """The claim gone (removed by hand, or damaged and taken over), the dead job's driver
    record still vouches for its record; and a cleanup that cannot finish the commit yet keeps
    that record, so the next cleanup finishes it. Broken, a transient error in one cleanup
    would leave a real decided commit to be refused as unvouched from then on."""
    committer, s = stores
    url, job_uuid, _ = dead_after_intent(committer, s)
    quiet_store(url).delete(CLAIM_FILE)
    once = FaultRule(action="fail", kinds=frozenset({Op.DELETE}), path_glob="part=*")
    report = cleanup_destination(open_store(url, faults=[once], latency_scale=0.0), older_than_s=0)
    assert report.failed and not report.rolled_forward, report
    assert quiet_store(url).exists(driver_path(job_uuid))
    report = cleanup_destination(quiet_store(url), older_than_s=0.0)
    assert report.rolled_forward and not report.failed, report
    store = quiet_store(url)
    assert inv.files_of_job(store, job_uuid, inv.visible_files(store))
    assert not store.exists(driver_path(job_uuid))


def test_an_abort_that_cannot_finish_a_decided_commit_keeps_its_driver_record(tmp_path):
    """A job whose decided `overwrite` fails (and whose abort cannot finish it either) leaves
    its driver record behind, abandoned: cleanup finishes the commit at once even where the
    claim no longer names the job (another job took it over). Broken (the record removed, as
    for an undecided job), the real decided commit would be refused as unvouched."""
    from dataferry import make_committer
    from dataferry.commit.job.commit import record_job_driver
    from dataferry.commit.records.claim import observe_record

    from ..helpers import run_tasks, visible

    store = open_store(str(tmp_path / "d"), faults=[])
    first = make_committer("direct", store, mode="append")
    job = first.new_job()
    first.setup_job(job)
    first.commit_job(job, run_tasks(first, job, {0: ["p=0/old"]}))
    c = make_committer("direct", store, mode="overwrite")
    job = record_job_driver(c, c.new_job())
    c.setup_job(job)
    messages = run_tasks(c, job, {0: ["p=1/new"]})
    broken = FaultRule(action="fail", kinds=frozenset({Op.DELETE}), path_glob="p=0*", times=-1)
    fault_layer(store).add_rule(broken)
    with pytest.raises(DataferryError):
        c.commit_job(job, messages)  # decided; its replace step fails, and again at once
    with pytest.raises(DataferryError):
        c.abort_job(job)  # the engine's abort cannot finish it either
    fault_layer(store).armed = False
    record = observe_record(store, driver_path(job.job_uuid))
    assert record is not None and record.claim is not None
    assert record.claim.state == "abandoned"
    store.delete(CLAIM_FILE)  # the claim names the job no more
    report = cleanup_destination(open_store(str(tmp_path / "d")), older_than_s=3600.0)
    assert report.rolled_forward and not report.failed, report
    data = visible(store)
    assert data and all(p.startswith("p=1/") for p in data), data  # the overwrite, finished
    assert not store.exists(driver_path(job.job_uuid))
