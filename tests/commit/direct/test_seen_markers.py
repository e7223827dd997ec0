"""The end of a committed job on direct markers (`deletion.delete_seen_markers`): markers are
deleted as one look saw them, never one made since, so the partitions the job committed into
need no listing for a file whose marker went unseen."""

from __future__ import annotations

from dataferry import make_committer
from dataferry.commit.direct import deletion
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.store import fault_layer, open_store
from dataferry.store.faults import FaultRule
from dataferry.store.types import Op


def _job(tmp_path, faults=()):
    store = open_store(str(tmp_path / "d"), faults=faults)
    committer = make_committer("direct", store)
    job = committer.new_job()
    committer.setup_job(job)
    return store, committer, job


def _committed_task(committer, job, index=0, attempt=0):
    task = job.task(index, attempt)
    committer.setup_task(task)
    written = committer.write_file(task, f"p={index}/a.parquet", b"a")
    return written, committer.commit_task(task, [written])


def test_a_marker_made_after_the_look_is_kept_for_cleanup(tmp_path, monkeypatch):
    """A given-up attempt marks and writes a file just after the job commit looked at its
    markers. Were its marker deleted with the seen ones (one recursive delete), nothing would
    name that file any more: it would stay beside the committed data forever, visible to
    plain readers. Its marker stays instead, and cleanup rolls the file back."""
    store, committer, job = _job(tmp_path)
    kept, message = _committed_task(committer, job)
    late = job.task(1)
    committer.setup_task(late)
    made: list[str] = []
    look = deletion._tree

    def look_then_a_late_attempt(*args):
        seen = look(*args)
        if not made:
            made.append(committer.write_file(late, "p=0/late.parquet", b"late"))
        return seen

    monkeypatch.setattr(deletion, "_tree", look_then_a_late_attempt)
    committer.commit_job(job, [message])
    marker = f"{committer.job_dir(job)}/{made[0]}.marker.CREATE"
    assert made and (store.exists(marker) or not store.exists(made[0]))
    assert store.exists(kept)
    cleanup_destination(store, older_than_s=0)
    assert not store.exists(made[0]) and store.exists(kept)
    assert not store.exists(committer.job_dir(job))


def test_a_stray_written_again_after_its_delete_is_removed(tmp_path):
    """A failed attempt's file that the attempt (still writing) puts back after the job
    commit deleted it, in a partition the job wrote: found by the job's tag in that
    directory and removed. Left, it would sit beside the committed file, visible to plain
    readers, with no marker left to name it."""
    stray = []

    def put_back(index, op, path):
        stray.append(path)
        open_store(str(tmp_path / "d")).write_bytes(path, b"late")

    rule = FaultRule(
        action="callback",
        when="after",
        kinds=frozenset({Op.DELETE}),
        path_glob="p=0/a-*-t0-a0.parquet",
        times=2,
        callback=put_back,
    )
    store, committer, job = _job(tmp_path, faults=[rule])
    failed = job.task(0, 0)
    committer.setup_task(failed)
    committer.write_file(failed, "p=0/a.parquet", b"partial")
    kept, message = _committed_task(committer, job, attempt=1)
    committer.commit_job(job, [message])
    assert len(stray) == 2  # deleted as a stray, put back; deleted at the end, put back
    assert [s.path for s in store.walk("p=0")] == [kept]
    assert not store.exists(committer.job_dir(job))


def test_a_clean_job_lists_none_of_its_partitions_at_the_end(tmp_path):
    """No stray and no marker made since the look: the end of the job lists no data
    directory (the listing that grew with every file the table's partitions hold)."""
    store, committer, job = _job(tmp_path, faults=[])
    files, messages = zip(*(_committed_task(committer, job, i) for i in range(3)), strict=True)
    layer = fault_layer(store)
    start = len(layer.trace)
    committer.commit_job(job, list(messages))
    listed = {t.path for t in layer.trace[start:] if t.op in (Op.LIST, Op.WALK)}
    assert not [p for p in listed if p.startswith("p=")], listed
    assert sorted(s.path for s in store.walk("") if not s.path.startswith("_")) == sorted(files)


def test_a_late_attempts_batch_of_markers_is_read_at_the_end(tmp_path, monkeypatch):
    """An attempt's announced markers as one batch file (`batch_markers`, as Delta's): one
    made just before the job's last look names a file the job did not commit, which the end
    of the job deletes as it would one marked by a file of its own. Were the batch taken for
    a record, its file would stay beside the committed data, named by no marker."""
    store, committer, job = _job(tmp_path)
    committer.batch_markers = True
    kept, message = _committed_task(committer, job)
    late = job.task(1)
    committer.setup_task(late)
    made: list[str] = []
    look = deletion._tree

    def a_late_attempt_then_look(*args):
        if not made:
            committer.announce_files(late, ["p=0/late.parquet", "p=2/late.parquet"])
            made.append(committer.write_file(late, "p=0/late.parquet", b"late"))
        return look(*args)

    monkeypatch.setattr(deletion, "_tree", a_late_attempt_then_look)
    committer.commit_job(job, [message])
    assert made and not store.exists(made[0]) and store.exists(kept)
    assert not store.exists(committer.job_dir(job))
