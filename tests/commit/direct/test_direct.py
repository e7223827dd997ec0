"""The direct committer: files written in place, found again by their markers (direct, or
through the marker service as a real subprocess on loopback)."""

from __future__ import annotations

import pytest

from dataferry import make_committer
from dataferry.commit.direct.committer import list_committed
from dataferry.engine import AttemptFailure, LocalEngine
from dataferry.errors import CommitError
from dataferry.markers import MarkerClient, marker_dir
from dataferry.markers.process import MarkerServiceProcess
from dataferry.store import open_store
from dataferry.verify import invariants as inv
from dataferry.verify.reference import reference_tasks

TOKEN = "t0ken"


@pytest.fixture
def service(tmp_path):
    with MarkerServiceProcess(str(tmp_path / "table"), token=TOKEN, batch_interval_ms=20) as svc:
        yield svc


def test_direct_committer_reconciles_partial_and_duplicate_files(tmp_path, service):
    for markers in ("direct", "service"):
        store = open_store(str(tmp_path / f"d-{markers}"))
        options = (
            {"markers": markers, "service_url": service.url, "service_token": TOKEN}
            if markers == "service"
            else {}
        )
        c = make_committer("direct", store, **options)
        engine = LocalEngine(
            workers=0, speculate_tasks=(1,), failures=(AttemptFailure(2, 0, "after_write"),)
        )
        run = engine.run_job(c, reference_tasks())
        assert (
            run.commit.details["stray_files_deleted"] == 3 + 3
        )  # the dead attempt's and the loser's
        assert (
            inv.check_output(store) == []
            and inv.check_no_leftovers(store, ("_SUCCESS", "_dataferry")) == []
        )
        assert list_committed(store) == sorted(
            s.path for s in store.walk("") if not s.path.startswith("_")
        )


def test_direct_task_commit_reports_what_its_committer_wrote(tmp_path):
    """The committer API used by hand, with no `written` list: nothing committed is lost."""
    store = open_store(str(tmp_path / "out"))
    c = make_committer("direct", store)
    job = c.new_job()
    c.setup_job(job)
    msgs = []
    for i in range(2):
        t = job.task(i)
        c.setup_task(t)
        c.write_file(t, f"p=1/f{i}.bin", b"x")
        with c.open_file(t, f"p=2/f{i}.bin") as sink:
            sink.write(b"y")
        msgs.append(c.commit_task(t))
    loser = job.task(1, attempt=1)  # a speculative duplicate that lost: its file goes
    c.write_file(loser, "p=1/f1.bin", b"z")
    c.abort_task(loser)
    result = c.commit_job(job, msgs)
    assert all(len(m.files) == 2 for m in msgs)
    assert result.files == 4 and result.details["stray_files_deleted"] == 1
    assert list_committed(store) == sorted(
        s.path for s in store.walk("") if not s.path.startswith("_")
    )


def test_direct_job_commit_refuses_to_delete_a_committed_attempts_unreported_file(tmp_path):
    """Written by one committer object, committed by another without the paths: the job
    commit must not take the attempt's files for strays."""
    store = open_store(str(tmp_path / "out"))
    writer = make_committer("direct", store)
    job = writer.new_job()
    writer.setup_job(job)
    t = job.task(0)
    final = writer.write_file(t, "p=1/part.parquet", b"data")
    other = make_committer("direct", store)
    message = other.commit_task(t)  # knows nothing of the file
    with pytest.raises(CommitError, match="were not in their task commits") as e:
        other.commit_job(job, [message])
    assert final in str(e.value)
    assert store.read_bytes(final) == b"data" and not store.exists("_SUCCESS")


def test_rollback_with_the_service_down(tmp_path):
    table = str(tmp_path / "t")
    store = open_store(table)
    with MarkerServiceProcess(table, token=TOKEN) as svc:
        c = make_committer(
            "direct", store, markers="service", service_url=svc.url, service_token=TOKEN
        )
        job = c.new_job()
        c.setup_job(job)
        for i in range(3):
            t = job.task(i)
            c.write_file(t, f"p={i}/data.parquet", b"x")
        url = svc.url
    assert len([s for s in store.walk("") if not s.path.startswith("_")]) == 3
    down = make_committer("direct", store, markers="service", service_url=url, service_token=TOKEN)
    down.abort_job(job)  # the service is gone: markers are read from its files
    assert store.walk("") == []


def test_cleanup_rolls_back_a_dead_direct_job(tmp_path):
    from dataferry.commit.job.cleanup import cleanup_destination

    store = open_store(str(tmp_path / "t"))
    store.write_bytes("p=0/kept.parquet", b"committed long ago")
    c = make_committer("direct", store)
    job = c.new_job()
    c.setup_job(job)
    c.write_file(job.task(0), "p=0/new.parquet", b"in flight")  # the driver died here
    report = cleanup_destination(store, older_than_s=0)
    assert report.removed == [marker_dir(job.job_uuid)]
    assert [s.path for s in store.walk("")] == ["p=0/kept.parquet"]


def test_announced_files_are_marked_in_one_request(tmp_path, service):
    """A task that announces its files gets all their markers in one request to the service;
    writing them then creates no more markers, and duplicates are still detected."""
    from dataferry.commit.direct.committer import DirectCommitter, DirectConfig

    store = open_store(str(tmp_path / "table"))
    config = DirectConfig(markers="service", service_url=service.url, service_token=TOKEN)
    committer = DirectCommitter(store, config)
    job = committer.new_job()
    committer.setup_job(job)
    task = job.task(0)
    names = [f"p={i % 3}/f{i}.parquet" for i in range(50)]
    before = MarkerClient(service.url, TOKEN).health()["service"]
    committer.announce_files(task, names)
    written = [committer.write_file(task, n, b"x") for n in names]
    after = MarkerClient(service.url, TOKEN).health()["service"]
    assert after.get("marker_create_batch", 0) - before.get("marker_create_batch", 0) == 1
    assert after.get("marker_create", 0) == before.get("marker_create", 0)
    markers = committer.markers(job)
    assert markers.data_paths() == set(written)
    assert markers.create_many([("p=0", written[0].rsplit("/", 1)[1])]) == [False]
    committer.commit_job(job, [committer.commit_task(task, written)])
    assert sorted(list_committed(store)) == sorted(written)


def test_an_attempt_that_commits_after_the_abort_keeps_the_markers_cleanup_needs(tmp_path):
    """The abort's sweep of late attempts is not for direct: a zombie's files are in the
    destination itself and only its markers let cleanup find and remove them."""
    from dataferry.commit.job.cleanup import cleanup_destination

    store = open_store(str(tmp_path / "d"))
    c = make_committer("direct", store)
    job = c.new_job()
    c.setup_job(job)
    c.abort_job(job)
    late = job.task(0)
    c.setup_task(late)
    c.write_file(late, "p=1/late.parquet", b"late")
    c.commit_task(late)
    c.sweep_late_attempts(job)  # (what an abort does last, had the zombie come before it)
    assert inv.visible_files(store)  # in place: readers see it until cleanup
    cleanup_destination(store, older_than_s=0)
    assert inv.visible_files(store) == []
