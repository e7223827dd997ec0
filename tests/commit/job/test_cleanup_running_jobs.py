"""`dataferry cleanup` never rolls back a job that is still running (`job/cleanup.py`): one whose
driver record is alive, whatever `--older-than` says, and one without a driver record whose
tasks wrote files within `--older-than`, however old its job directory itself is."""

from __future__ import annotations

import os
import time
from dataclasses import replace

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.claim import Claim
from dataferry.commit.records.drivers import driver_path
from dataferry.store import open_store
from dataferry.store.skew import ClockSkewStore

from ..helpers import run_tasks, visible

HOUR = 3600.0


def job_of(store):
    c = make_committer("manifest", store)
    job = c.new_job()
    c.setup_job(job)
    return c, job


def age_tree(root: str, seconds: float, files: bool = True) -> None:
    """Make every directory under `root` (and `root`), and its files unless `files` is
    False, `seconds` old."""
    t = time.time() - seconds
    for d, dirs, names in os.walk(root):
        for n in dirs + (names if files else []):
            os.utime(os.path.join(d, n), (t, t), follow_symlinks=False)
    os.utime(root, (t, t))


def test_a_job_whose_tasks_write_now_is_left_however_old_its_job_directory(tmp_path):
    """A leftover is aged by its newest file. Were it aged by its job directory's own time, a
    job set up two hours ago (no driver record: an engine that does not keep one) whose tasks
    are still writing would be rolled back by `cleanup --older-than 1h`: its tasks' output
    deleted under them, and its commit then fails."""
    store = open_store(str(tmp_path / "d"))
    c, job = job_of(store)
    msgs = run_tasks(c, job, {0: ["p=0/early"]})
    age_tree(os.path.join(store.root, "_temporary"), 2 * HOUR)
    late = job.task(1)
    c.setup_task(late)
    c.write_file(late, "p=1/now", b"written just now")  # a task still at work
    age_tree(os.path.join(store.root, "_temporary"), 2 * HOUR, files=False)  # its file: new
    job_dir = c.job_dir(job)
    assert time.time() - store.stat(job_dir).mtime > HOUR  # the directory itself looks old

    report = cleanup_destination(store, older_than_s=HOUR)
    assert not report.rolled_back and not report.rolled_forward, report
    assert job_dir in report.left, report

    c.write_file(late, "p=1/later", b"more")  # the running job carries on and commits
    c.commit_job(job, [*msgs, c.commit_task(late)])
    assert visible(store) == ["p=0/early", "p=1/later", "p=1/now"]


def test_a_job_whose_driver_record_is_alive_is_left_even_at_older_than_0(tmp_path):
    """A live driver keeps its job's leftovers whatever the age. Were the record ignored,
    `cleanup --older-than 0` (what the docs tell users to run after a crash) would roll back
    a job another host is running: its tasks' files deleted, its commit failing."""
    store = open_store(str(tmp_path / "d"))
    c, job = job_of(store)
    msgs = run_tasks(c, job, {0: ["p=0/a"]})
    record = Claim(str(job.job_id), job.job_uuid, "manifest", "append", host="elsewhere")
    store.write_bytes(driver_path(job.job_uuid), record.to_bytes())  # renewed just now

    report = cleanup_destination(store, older_than_s=0)
    assert c.job_dir(job) in report.left and "alive" in report.left[c.job_dir(job)], report
    assert not report.rolled_back and store.exists(c.job_dir(job))
    assert store.exists(driver_path(job.job_uuid))

    c.commit_job(job, msgs)
    assert visible(store) == ["p=0/a"]


class NoTimesStore(ClockSkewStore):
    """The same files, through a store that gives no modification time (as the Azure store
    did before it read adlfs's `last_modified`)."""

    def _shift(self, st):
        return replace(st, mtime=None)


def test_a_job_of_unknown_age_is_left_when_the_store_gives_no_times(tmp_path):
    """A leftover without a driver record is judged by its newest file's age. Were a missing
    time read as 0 (the epoch), every such job would look 56 years old to `cleanup
    --older-than 1h`: a job whose tasks are writing now would be rolled back under them."""
    store = open_store(str(tmp_path / "d"))
    c, job = job_of(store)
    msgs = run_tasks(c, job, {0: ["p=0/now"]})

    report = cleanup_destination(NoTimesStore(store, 0.0), older_than_s=HOUR)
    assert not report.rolled_back and not report.rolled_forward, report
    assert "age is unknown" in report.left[c.job_dir(job)], report

    c.commit_job(job, msgs)  # the job carries on and commits
    assert visible(store) == ["p=0/now"]


class NoDirectoryTimesStore(ClockSkewStore):
    """Files with their times, directories without (an object store's prefixes)."""

    def _shift(self, st):
        return replace(st, mtime=None) if st.is_dir else st


def test_an_old_job_is_recovered_where_only_directories_have_no_time(tmp_path):
    """On S3 and Azure a directory is a prefix with no time of its own: the files' times say
    the job's age. Were a directory's missing time read as "age unknown", `cleanup
    --older-than 1h` would leave every dead job there for ever."""
    store = open_store(str(tmp_path / "d"))
    c, job = job_of(store)
    run_tasks(c, job, {0: ["p=0/old"]})
    age_tree(os.path.join(store.root, "_temporary"), 2 * HOUR)

    report = cleanup_destination(NoDirectoryTimesStore(store, 0.0), older_than_s=HOUR)
    assert c.job_dir(job) in report.rolled_back, report
