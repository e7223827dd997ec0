"""The staging committers name every upload id before a part is sent.

A task attempt that dies after its first part has gone up leaves uploads pending. Its uploads
record must already hold their ids: that is what lets the engine's abort of the dead attempt
abort exactly those uploads at once (by id, while another attempt of the same task may be
uploading the same keys), and what the job's cleanup reads afterwards.
"""

from __future__ import annotations

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.s3a.staging import layout
from dataferry.commit.s3a.staging.records import UploadsRecord
from dataferry.errors import InjectedCrash
from dataferry.store import FaultRule, Op, fault_layer, open_store

FILES = ("p=1/a", "p=1/b")


def _pending(store):
    return {(u.path, u.upload_id) for u in store.list_uploads("")}


def _visible(store):
    return sorted(s.path for s in store.walk("") if not s.path.startswith("_"))


def _dies_after_its_first_part(store, committer, job):
    """Attempt 0 of task 0 uploads its files and dies just after the first part is sent."""
    dead = job.task(0, 0)
    committer.setup_task(dead)
    for name in FILES:
        committer.write_file(dead, name, f"dead:{name}".encode())
    fault = fault_layer(store)
    rule = FaultRule(action="crash", when="after", kinds=frozenset({Op.MULTIPART_PART}))
    fault.add_rule(rule)
    with pytest.raises(InjectedCrash):
        committer.commit_task(dead)
    fault.armed = False
    assert rule.fired == 1  # one part sent (it took effect), then the process died
    assert [t.op for t in fault.trace].count(Op.MULTIPART_PART) == 1
    return dead


@pytest.fixture(params=["directory", "partitioned"])
def setting(request, tmp_path):
    store = open_store(f"sim:s3:{tmp_path / 'dest'}", faults=[], latency_scale=0.0)
    c = make_committer(
        request.param, store, staging_dir=str(tmp_path / "staging"), upload_threads=1
    )
    job = c.new_job()
    c.setup_job(job)
    return store, c, job


def test_a_task_dead_after_its_first_part_has_recorded_every_upload_id(setting, tmp_path):
    store, c, job = setting
    dead = _dies_after_its_first_part(store, c, job)
    pending = _pending(store)
    assert {path for path, _ in pending} == set(FILES)  # both started, one part sent
    record = UploadsRecord.load(store, layout.uploads_record(dead))
    assert record is not None and sorted(record.keys) == sorted(FILES)
    assert set(record.uploads.items()) == pending  # named before any byte went up
    assert record.unrecorded_keys() == []


def test_the_dead_attempts_uploads_are_aborted_by_id_beside_a_live_attempt(setting, tmp_path):
    """The engine gives up on the dead attempt while a second attempt of the same task has
    uploaded the same keys: aborting the dead one removes exactly its uploads at once, the
    second commits, and nothing is left pending."""
    store, c, job = setting
    dead = _dies_after_its_first_part(store, c, job)
    dead_uploads = _pending(store)
    elsewhere = make_committer(c.name, store, staging_dir=str(tmp_path / "other"))
    retry = job.task(0, 1)
    elsewhere.setup_task(retry)
    for name in FILES:
        elsewhere.write_file(retry, name, f"retry:{name}".encode())
    msg = elsewhere.commit_task(retry)
    retry_uploads = _pending(store) - dead_uploads
    assert len(retry_uploads) == len(FILES)
    c.abort_task(dead)
    assert _pending(store) == retry_uploads  # the dead attempt's are gone, by id, now
    assert not store.exists(layout.uploads_record(dead))  # nothing left for cleanup to do
    c.commit_job(job, [msg])
    assert _visible(store) == sorted(FILES) and _pending(store) == set()
    assert store.read_bytes("p=1/b") == b"retry:p=1/b"


def test_cleanup_leaves_nothing_pending_after_the_task_and_its_driver_died(setting, tmp_path):
    store, c, job = setting
    _dies_after_its_first_part(store, c, job)
    assert _pending(store)
    report = cleanup_destination(store, older_than_s=0)
    assert report.rolled_back
    assert _pending(store) == set() and _visible(store) == []
    assert not any(e.name.startswith(layout.STAGING_PREFIX) for e in store.list_or_empty(""))
