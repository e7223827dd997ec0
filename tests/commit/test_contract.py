"""One contract, every committer of files: each registered committer (`registry.KNOWN`) of the
"files" family (the table committers' contract is the table's: tests/commit/table), on every kind
of store its row declares it safe on (`safe_on`), keeps the promises below. A new committer
joins by its registry row; a promise a committer does not keep is declared there (`breaks`:
v2, the unsafe baseline), never named here.

Stores are the cheap ones: a temporary local directory, `memory://`, and the `sim:` models
without latency (`sim:s3` for the committers that need multipart upload), and fake-gcs-server
(`gcs`, the GCS magic committer's sessions). Every store is
wrapped in a fault layer, with no rule armed until a test crashes a commit on purpose.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.commit.records.drivers import driver_crashed
from dataferry.commit.records.intent import INTENT_FILE, STAGED_INTENT
from dataferry.commit.records.success import SUCCESS_FILE
from dataferry.commit.registry import KNOWN, CommitterSpec
from dataferry.errors import CommitError, DestinationError, InjectedCrash, JobCommitError
from dataferry.store import FaultRule, Op, Store, fault_layer, open_store

from .helpers import contents, expected, run_tasks, visible

FILES = {0: ["p=0/part-0", "p=1/part-0"], 1: ["p=0/part-1"]}  # task index -> its files
OLD = {"p=0/old-0": b"old"}  # data already in the destination, beside task 0's files


@dataclass
class Case:
    """One committer on one kind of store, with a fresh destination."""

    spec: CommitterSpec
    kind: str
    store: Store
    root: Path  # the destination's directory (local stores) or its backing directory (sim)
    tmp: Path

    def committer(self, mode: str = "append"):
        fields = {f.name for f in dataclasses.fields(self.spec.config_class())}
        options = {"staging_dir": str(self.tmp / "staging")} if "staging_dir" in fields else {}
        return make_committer(self.spec.name, self.store, mode=mode, **options)

    def job(self, mode: str = "append"):
        c = self.committer(mode)
        job = c.new_job()
        c.setup_job(job)
        return c, job

    def pending_uploads(self) -> list:
        return self.store.list_uploads("") if self.store.capabilities.multipart_upload else []


def open_kind(kind: str, tmp: Path, request=None) -> Store:
    root = str(tmp / "dest")
    if kind == "gcs":  # fake-gcs-server through gcsfs
        return open_store(request.getfixturevalue("gcs_url"), faults=[])
    if kind == "local":
        return open_store(root, faults=[])
    if kind == "memory":
        return open_store(f"memory://dataferry-contract/{uuid.uuid4().hex}", faults=[])
    return open_store(f"sim:{kind}:{root}", latency_scale=0.0, faults=[])


def cases(promise: str, kinds: tuple[str, ...] | None = None) -> list:
    """Every (committer, store kind) that keeps `promise`, as parameters of `case`."""
    return [
        pytest.param((name, kind), id=f"{name}-{kind}")
        for name, spec in KNOWN.items()
        if promise not in spec.breaks and spec.family == "files"  # tables: tests/commit/table
        for kind in spec.safe_on
        if kinds is None or kind in kinds
    ]


@pytest.fixture
def case(request, tmp_path) -> Case:
    name, kind = request.param
    if kind == "abfs":  # Azure Blob: the Azurite test server (tests/servers/azurite.py)
        store = open_store(request.getfixturevalue("azurite_url").url, faults=[])
        return Case(KNOWN[name], kind, store, tmp_path / "dest", tmp_path)
    return Case(KNOWN[name], kind, open_kind(kind, tmp_path, request), tmp_path / "dest", tmp_path)


def promise(name: str, kinds: tuple[str, ...] | None = None):
    return pytest.mark.parametrize("case", cases(name, kinds), indirect=True)


def assert_nothing_left(case: Case, c, job) -> None:
    """Nothing of the job remains: nothing visible, no `_SUCCESS`, no job directory, no
    pending upload."""
    assert visible(case.store) == []
    assert not case.store.exists(SUCCESS_FILE)
    assert not case.store.exists(c.job_dir(job))
    assert case.pending_uploads() == []


def crash_at_intent(store: Store, job_dir: str, when: str) -> None:
    """Crash the job commit at its intent record: `before` it is saved, or `after` (written,
    or, where closes are slow, the copy written ahead renamed into place)."""
    intent = f"{job_dir}/{INTENT_FILE}"  # the job's own (hive's inner commit has one too)
    staged = f"{job_dir}/{STAGED_INTENT}"

    def saving(index: int, op: Op, path: str) -> bool:
        return (op, path) in ((Op.WRITE, intent), (Op.RENAME, staged))

    fault_layer(store).add_rule(FaultRule(action="crash", when=when, predicate=saving))


def test_every_committer_declares_where_it_is_safe():
    for spec in KNOWN.values():
        assert spec.safe_on, f"{spec.name}: its registry row declares no store it is safe on"
        assert set(spec.safe_on) <= {"local", "memory", "hdfs", "s3", "gcs", "abfs"}, spec


# --- the task side --------------------------------------------------------------------------


def once_more(setup, context) -> None:
    """A repeated setup is a no-op, or refused (CommitError: the manifest committer refuses a
    reused job attempt directory as Hadoop's does, the magic committer a task attempt run
    twice); either way the job goes on unharmed."""
    try:
        setup(context)
    except CommitError:
        pass


@promise("setup_idempotent")
def test_setup_job_and_setup_task_again_do_no_harm(case):
    c, job = case.job()
    once_more(c.setup_job, job)
    msgs = []
    for i, names in FILES.items():
        t = job.task(i)
        c.setup_task(t)
        once_more(c.setup_task, t)
        for name in names:
            c.write_file(t, name, f"{i}:{name}".encode())
        msgs.append(c.commit_task(t))
    c.commit_job(job, msgs)
    assert contents(case.store) == expected(c, job, FILES)


@promise("task_commit_idempotent")
def test_a_task_committed_twice_is_committed_once(case):
    c, job = case.job()
    msgs = run_tasks(c, job, FILES)
    try:  # committing the same attempt again is refused, or changes nothing
        again = c.commit_task(job.task(0))
    except CommitError:
        again = msgs[0]
    before = contents(case.store)
    with pytest.raises(JobCommitError, match="committed twice"):
        c.commit_job(job, [msgs[0], again, msgs[1]])
    assert contents(case.store) == before  # the refusal changed nothing a reader sees
    c.commit_job(job, msgs)
    assert contents(case.store) == expected(c, job, FILES)


@promise("abort_task_removes_output")
def test_abort_task_removes_the_attempts_output_and_is_idempotent(case):
    c, job = case.job()
    t = job.task(0)
    c.setup_task(t)
    for name in FILES[0]:
        c.write_file(t, name, b"aborted")
    c.abort_task(t)
    c.abort_task(t)
    assert case.store.walk(c.task_work_path(t)) == []
    assert visible(case.store) == [] and case.pending_uploads() == []


@promise("aborted_never_visible")
def test_an_aborted_attempt_is_never_visible_after_job_commit(case):
    c, job = case.job()
    stale = job.task(1, 0)  # task 1's first attempt fails; its second commits
    c.setup_task(stale)
    for name in [*FILES[1], "p=9/only-aborted"]:
        c.write_file(stale, name, b"aborted")
    c.abort_task(stale)
    gone = job.task(2)  # task 2 fails for good
    c.setup_task(gone)
    c.write_file(gone, "p=2/part-2", b"aborted")
    c.abort_task(gone)
    msgs = run_tasks(c, job, {0: FILES[0]}) + run_tasks(c, job, {1: FILES[1]}, attempt=1)
    c.commit_job(job, msgs)
    assert contents(case.store) == {
        **expected(c, job, {0: FILES[0]}),
        **expected(c, job, {1: FILES[1]}, attempt=1),
    }
    assert case.pending_uploads() == []


@promise("empty_job")
def test_an_empty_job_commits_success_and_nothing_else(case):
    c, job = case.job()
    result = c.commit_job(job, [])
    assert result.files == 0
    assert visible(case.store) == [] and case.store.exists(SUCCESS_FILE)
    assert not case.store.exists(c.job_dir(job)) and case.pending_uploads() == []


# --- write modes -------------------------------------------------------------------------------


def with_old_data(case: Case, old: dict[str, bytes] = OLD) -> None:
    for path, data in old.items():
        case.store.write_bytes(path, data)


@promise("mode_error")
def test_mode_error_refuses_a_destination_with_data_naming_it(case):
    with_old_data(case)
    c, job = case.job("error")
    msgs = run_tasks(c, job, FILES)
    with pytest.raises(DestinationError) as e:
        c.commit_job(job, msgs)
    assert case.store.full_url() in str(e.value) or "p=0" in str(e.value)
    c.abort_job(job)
    assert contents(case.store) == OLD and case.pending_uploads() == []


@promise("mode_append")
def test_mode_append_keeps_what_was_there(case):
    with_old_data(case)
    c, job = case.job("append")
    c.commit_job(job, run_tasks(c, job, FILES))
    assert contents(case.store) == {**OLD, **expected(c, job, FILES)}


@promise("mode_overwrite")
def test_mode_overwrite_replaces_what_was_there(case):
    with_old_data(case)
    c, job = case.job("overwrite")
    c.commit_job(job, run_tasks(c, job, FILES))
    assert contents(case.store) == expected(c, job, FILES)


# what a partition overwrite (pyarrow's delete_matching) keeps and replaces: the tasks write p=0
# and p=1; p=0's old file goes, p=2 (and a nested one) and p=1's sibling p=10 stay
PARTITIONED_OLD = {
    "p=0/old-0": b"old",
    "p=0/deeper/old-1": b"old",
    "p=2/old-2": b"kept",
    "p=2/q=1/old-3": b"kept",
    "p=10/old-4": b"kept",
}
KEPT = {k: v for k, v in PARTITIONED_OLD.items() if v == b"kept"}


@promise("mode_overwrite")
def test_a_partition_overwrite_replaces_the_partitions_written_and_keeps_the_others(case):
    with_old_data(case, PARTITIONED_OLD)
    c, job = case.job("overwrite-partitions")
    c.commit_job(job, run_tasks(c, job, FILES))
    assert contents(case.store) == {**KEPT, **expected(c, job, FILES)}
    assert case.store.exists(SUCCESS_FILE)


@promise("mode_overwrite")
def test_a_partition_overwrite_of_an_unpartitioned_write_replaces_everything(case):
    with_old_data(case, PARTITIONED_OLD)
    c, job = case.job("overwrite-partitions")
    files = {0: ["part-0"], 1: ["part-1"]}
    c.commit_job(job, run_tasks(c, job, files))
    assert contents(case.store) == expected(c, job, files)


@promise("roll_forward")
def test_a_partition_overwrite_dead_after_its_intent_is_rolled_forward_keeping_the_others(case):
    with_old_data(case, PARTITIONED_OLD)
    c, job, report = die_at_intent_then_clean_up(case, "overwrite-partitions", "after")
    assert report.rolled_forward and not report.failed
    assert contents(case.store) == {**KEPT, **expected(c, job, FILES)}


@promise("rollback_without_intent")
def test_a_partition_overwrite_dead_before_its_intent_leaves_every_old_partition(case):
    with_old_data(case, PARTITIONED_OLD)
    die_at_intent_then_clean_up(case, "overwrite-partitions", "before")
    assert contents(case.store) == PARTITIONED_OLD


# --- dead jobs ---------------------------------------------------------------------------------


def die_at_intent_then_clean_up(case: Case, mode: str, when: str):
    """A job in `mode` whose driver dies `when` ("before", "after") its intent record is
    saved, then `dataferry cleanup`; returns the committer, the job and cleanup's report."""
    c, job = case.job(mode)
    msgs = run_tasks(c, job, FILES)
    crash_at_intent(case.store, c.job_dir(job), when)
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(case.store).armed = False
    return c, job, cleanup_destination(case.store, older_than_s=0)


@promise("roll_forward")
def test_a_commit_dead_after_its_intent_is_rolled_forward(case):
    c, job, report = die_at_intent_then_clean_up(case, "append", "after")
    assert report.rolled_forward and not report.failed
    assert contents(case.store) == expected(c, job, FILES)
    assert case.store.exists(SUCCESS_FILE)
    assert not case.store.exists(c.job_dir(job)) and case.pending_uploads() == []


@promise("rollback_without_intent")
def test_a_commit_dead_before_its_intent_is_rolled_back(case):
    c, job, report = die_at_intent_then_clean_up(case, "append", "before")
    assert report.removed and not report.failed and not report.rolled_forward
    assert_nothing_left(case, c, job)


@promise("leftovers_removed")
def test_cleanup_finds_and_removes_a_dead_jobs_leftovers(case):
    c, job = case.job()
    run_tasks(c, job, {0: FILES[0]})  # committed, never job-committed
    t = job.task(1)
    c.setup_task(t)
    c.write_file(t, FILES[1][0], b"never committed")
    driver_crashed(case.store, job.job_uuid)  # the driver dies
    report = cleanup_destination(case.store, older_than_s=0)
    assert report.found and report.removed and not report.failed, report
    assert_nothing_left(case, c, job)


# --- links -------------------------------------------------------------------------------------


@promise("links_refused", kinds=("local",))
def test_a_link_in_the_destination_is_refused_before_anything_changes(case):
    with_old_data(case)
    outside = case.tmp / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"outside")
    os.symlink(outside, case.root / "linked")
    before = visible(case.root)
    c = case.committer("overwrite")
    job = c.new_job()
    with pytest.raises(DestinationError):
        c.setup_job(job)
        c.commit_job(job, run_tasks(c, job, FILES))
    c.abort_job(job)
    assert visible(case.root) == before
    assert (case.root / "p=0" / "old-0").read_bytes() == b"old"
    assert os.listdir(outside) == ["keep"] and (outside / "keep").read_bytes() == b"outside"
