"""A driver record's heartbeat ends before the record is removed: a renewal in flight when the
job ends must neither bring the record back nor leave its hidden temporary file."""

from __future__ import annotations

import threading
import time

from dataferry.commit.records.claim import CLAIM_DIR, Claim
from dataferry.commit.records.drivers import driver_path, end_driver, record_driver
from dataferry.errors import NotFound
from dataferry.store import FaultRule, Op, fault_layer, open_store


def test_end_driver_waits_for_a_renewal_in_flight(tmp_path):
    store = open_store(str(tmp_path / "dest"), faults=[])
    record = Claim(job_id="job_1", job_uuid="u-1", committer="manifest", mode="append", lease_s=0.3)
    record_driver(store, record)
    renewing = threading.Event()

    def slow_renewal(i, op, path):
        renewing.set()
        time.sleep(0.4)  # the job ends meanwhile

    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            kinds=frozenset({Op.WRITE}),
            path_glob=f"{CLAIM_DIR}/drivers/*",
            callback=slow_renewal,
        )
    )
    assert renewing.wait(5.0), "the heartbeat never renewed the record"
    end_driver(store, record.job_uuid)
    time.sleep(0.5)  # a heartbeat still running would have written by now
    assert not store.exists(driver_path(record.job_uuid))
    assert not store.exists(CLAIM_DIR), [f.path for f in store.walk(CLAIM_DIR)]


def test_a_driver_record_is_written_though_another_job_empties_the_directory_meanwhile(tmp_path):
    """Another job ending at the same moment removes the emptied drivers directory between
    this write's directory creation and its file (the store answers NotFound): the record is
    written again, and the job starts; before, the job failed with that NotFound (seen with
    concurrent appenders into one table)."""
    store = open_store(str(tmp_path / "dest"), faults=[])
    raced = []

    def directory_removed_meanwhile(i, op, path):
        if not raced:
            raced.append(path)
            raise NotFound(f"write {path}: No such file or directory")

    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            kinds=frozenset({Op.WRITE}),
            path_glob=f"{CLAIM_DIR}/drivers/*",
            callback=directory_removed_meanwhile,
        )
    )
    record = Claim(job_id="job_2", job_uuid="u-2", committer="manifest", mode="append", lease_s=60)
    record_driver(store, record)
    assert raced and store.exists(driver_path(record.job_uuid))
    end_driver(store, record.job_uuid)


def test_one_thread_renews_every_driver_record_of_the_process(tmp_path):
    """Two jobs' records, each renewed every sixth of its lease, by the process's one heart
    thread: a job's set-up starts no thread of its own (and its end joins none), which under
    load cost a scheduling wait each. Broken (a thread per record, or a record the heart
    forgets), there are two such threads, or a record is never renewed."""
    store = open_store(str(tmp_path / "dest"), faults=[])
    records = [
        Claim(
            job_id=f"job_{i}", job_uuid=f"u-{i}", committer="manifest", mode="append", lease_s=0.3
        )
        for i in (2, 3)
    ]
    renewed = {r.job_uuid: threading.Event() for r in records}

    def seen(i, op, path):
        for uuid, event in renewed.items():
            if path.endswith(f"{uuid}.json"):
                event.set()

    for r in records:
        record_driver(store, r)
    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            kinds=frozenset({Op.WRITE}),
            path_glob=f"{CLAIM_DIR}/drivers/*",
            callback=seen,
            times=-1,
        )
    )
    try:
        assert all(e.wait(10.0) for e in renewed.values()), "a record was never renewed"
        hearts = [t for t in threading.enumerate() if t.name.startswith("dataferry-driver")]
        assert len(hearts) == 1, hearts
    finally:
        for r in records:
            end_driver(store, r.job_uuid)
    assert not store.exists(CLAIM_DIR)
