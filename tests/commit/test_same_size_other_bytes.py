"""A file of the recorded size is not ours unless its etag (or its bytes) say so.

Every rename-based committer has a place where a move it is finishing (resumed after a crash,
answered ambiguously, or refused because the destination is taken) looks at what stands at the
destination and decides whether that is its own file, moved earlier. Another writer's file of
the same name and the same size, but other bytes, must never pass for it: the move fails (a
conflict) rather than counting as done, and the job's own file is not deleted.

One test per place: the manifest committer's rename stage (a resumed stage's listing check, the
resolution of an ambiguous answer, and the finishing of a copy-then-delete rename that found its
destination taken), v1's merge (`_finish_move`) and Hive's load (`_move`).
"""

from __future__ import annotations

import pytest

from dataferry import make_committer
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.errors import CommitError, InjectedCrash, JobCommitError
from dataferry.store import FaultRule, Op, fault_layer, open_store
from dataferry.store.faults import ambiguous_at

OURS = b"ours:0123456789"
THEIRS = b"them:9876543210"  # as long as ours, other bytes
assert len(OURS) == len(THEIRS) and OURS != THEIRS


def _place_decoy(store, dest):
    """Another writer's file of our size at `dest`, behind the fault layer (not traced)."""
    fault_layer(store).inner.write_bytes(dest, THEIRS)


def _rename_of(store, name):
    """The index-free selector of the rename that moves a data file named `name` into place."""
    fault = fault_layer(store)

    def pick(i, op, path):
        return op == Op.RENAME and fault.trace[i].dest == name

    return pick


def _data(store):
    return sorted(
        s.path for s in store.walk("") if not s.path.startswith(("_", "."))
    )  # no records, no staging


def _ours_survives(store):
    """The job's own bytes are still somewhere on the store (it was not deleted as moved)."""
    return any(not s.is_dir and store.read_bytes(s.path) == OURS for s in store.walk(""))


# --- manifest --------------------------------------------------------------------------------


def _manifest_job(tmp_path):
    store = open_store(str(tmp_path / "out"), faults=[])
    c = make_committer("manifest", store, io_threads=1)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "a", b"a-bytes")
    c.write_file(t, "b", OURS)
    return store, c, job, [c.commit_task(t)]


def test_manifest_resumed_rename_does_not_take_a_same_size_file_for_its_own(tmp_path):
    """The commit dies after moving `a`; before it is resumed another writer puts a file of
    `b`'s size at `b`. The resumed stage's one listing sees the size it recorded, but not the
    etag: `b` is not moved yet, and finishing the commit must fail on the file in the way."""
    store, c, job, msgs = _manifest_job(tmp_path)
    fault_layer(store).add_rule(
        FaultRule(action="crash", when="after", predicate=_rename_of(store, "a"))
    )
    with pytest.raises(InjectedCrash):
        c.commit_job(job, msgs)
    fault_layer(store).armed = False
    assert store.exists("a") and not store.exists("b")
    _place_decoy(store, "b")
    with pytest.raises(JobCommitError, match="already there"):
        c.abort_job(job)  # decided: finishing is the only way on
    assert not store.exists("_SUCCESS")
    assert store.read_bytes("b") == THEIRS and _ours_survives(store)
    report = cleanup_destination(store, older_than_s=0)  # still in the way: left for an operator
    assert not store.exists("_SUCCESS") and _ours_survives(store), report


def test_manifest_ambiguous_rename_does_not_take_a_same_size_file_for_its_own(tmp_path):
    """The rename of `b` is answered 'timed out' without having happened, and meanwhile
    another writer's file of the same size appears at `b`: not done, whatever the size says."""
    store, c, job, msgs = _manifest_job(tmp_path)
    fault = fault_layer(store)
    rule = ambiguous_at(0, "before", meanwhile=lambda i, op, path: _place_decoy(store, "b"))
    rule.index, rule.predicate = None, _rename_of(store, "b")
    fault.add_rule(rule)
    with pytest.raises(JobCommitError, match="unknown outcome"):
        c.commit_job(job, msgs)
    assert rule.fired == 1
    assert c.stats.counter("commit_file_rename_recovered") == 0
    assert not store.exists("_SUCCESS")
    assert store.read_bytes("b") == THEIRS and _ours_survives(store)


def test_manifest_rename_onto_a_taken_destination_does_not_finish_as_a_copy(tmp_path):
    """Another writer's file of the same size is at `b` when its rename is sent (the store says
    'exists'): that is not a copy-then-delete rename of ours that died after its copy, so the
    source must stay and the commit fail."""
    store, c, job, msgs = _manifest_job(tmp_path)
    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            predicate=_rename_of(store, "b"),
            callback=lambda i, op, path: _place_decoy(store, "b"),
        )
    )
    with pytest.raises(JobCommitError, match="already there"):
        c.commit_job(job, msgs)
    assert not store.exists("_SUCCESS")
    assert store.read_bytes("b") == THEIRS and _ours_survives(store)


# --- v1 ----------------------------------------------------------------------------------------


def test_v1_merge_does_not_finish_a_copy_onto_a_same_size_file(tmp_path):
    """v1's merge moves a top-level file on its own; another writer's file of the same size is
    at its destination when the rename is sent. Its finishing (a copy-then-delete rename that
    died after the copy is completed by deleting the source) must see other bytes: fail."""
    store = open_store(str(tmp_path / "out"), faults=[])
    c = make_committer("v1", store)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "b", OURS)
    msgs = [c.commit_task(t)]
    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            predicate=_rename_of(store, "b"),
            callback=lambda i, op, path: _place_decoy(store, "b"),
        )
    )
    with pytest.raises(JobCommitError, match="in the way"):
        c.commit_job(job, msgs)
    assert not store.exists("_SUCCESS")
    assert store.read_bytes("b") == THEIRS and _ours_survives(store)
    fault_layer(store).armed = False
    with pytest.raises(JobCommitError, match="in the way"):
        c.abort_job(job)  # resumed: the same check, the same answer
    assert not store.exists("_SUCCESS") and _ours_survives(store)


# --- hive --------------------------------------------------------------------------------------


def test_hive_load_does_not_finish_a_move_onto_a_same_size_file(tmp_path):
    """An append into an existing partition moves file by file; another writer's file of the
    same size appears at the destination just before the move. The load must not finish it as
    a copy-then-delete rename of its own (deleting its staged file): it fails, decided."""
    store = open_store(str(tmp_path / "t"), faults=[])
    first = make_committer("hive", store, mode="append")
    job = first.new_job()
    first.setup_job(job)
    t = job.task(0)
    first.setup_task(t)
    first.write_file(t, "day=d0/part-0.parquet", b"earlier")
    first.commit_job(job, [first.commit_task(t)])

    c = make_committer("hive", store, mode="append", move_threads=1, load_partition_threads=1)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.setup_task(t)
    c.write_file(t, "day=d0/part-1.parquet", OURS)
    msgs = [c.commit_task(t)]
    target = "day=d0/part-1.parquet"
    fault_layer(store).add_rule(
        FaultRule(
            action="callback",
            predicate=_rename_of(store, target),
            callback=lambda i, op, path: _place_decoy(store, target),
        )
    )
    with pytest.raises(CommitError):
        c.commit_job(job, msgs)
    assert store.read_bytes(target) == THEIRS and _ours_survives(store)
    fault_layer(store).armed = False
    with pytest.raises(CommitError):
        c.abort_job(job)  # resumed from the journal: the same check, the same answer
    assert store.read_bytes(target) == THEIRS and _ours_survives(store)
