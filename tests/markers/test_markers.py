"""Markers: direct ones, and the marker service as a real subprocess on loopback."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from dataferry import make_committer
from dataferry.commit.direct.committer import list_committed
from dataferry.engine import AttemptFailure, LocalEngine
from dataferry.errors import CommitError
from dataferry.markers import (
    DirectMarkers,
    MarkerClient,
    MarkerService,
    MarkerServiceConfig,
    ServiceMarkers,
    data_path,
    marker_dir,
    marker_name,
)
from dataferry.markers.files import read_marker_files, read_marker_type
from dataferry.markers.process import MarkerServiceProcess
from dataferry.store import open_store
from dataferry.verify import invariants as inv
from dataferry.verify.reference import reference_tasks

TOKEN = "t0ken"


def test_names_follow_hudi():
    m = marker_name("2026/11/01", "f-0_1-2-3.parquet")
    assert m == "2026/11/01/f-0_1-2-3.parquet.marker.CREATE"
    assert data_path(m) == "2026/11/01/f-0_1-2-3.parquet"


def test_direct_markers(tmp_path):
    store = open_store(str(tmp_path))
    m = DirectMarkers(store, marker_dir("j"))
    assert m.create("p=1", "a.parquet") and not m.create("p=1", "a.parquet")
    m.create("", "top.parquet")
    assert m.data_paths() == {"p=1/a.parquet", "top.parquet"}
    m.delete_all()
    assert m.all() == set()


@pytest.fixture
def service(tmp_path):
    with MarkerServiceProcess(str(tmp_path / "table"), token=TOKEN, batch_interval_ms=20) as svc:
        yield svc


def test_batching_batches_and_duplicates_are_detected(tmp_path, service):
    store = open_store(str(tmp_path / "table"))
    m = ServiceMarkers(MarkerClient(service.url, TOKEN), store, marker_dir("job"))
    with ThreadPoolExecutor(32) as pool:
        created = list(pool.map(lambda i: m.create(f"p={i % 4}", f"f{i}.parquet"), range(400)))
    assert all(created)
    assert not m.create("p=0", "f0.parquet")  # already exists
    files = read_marker_files(store, marker_dir("job"))
    assert sum(len(v) for v in files.values()) == 400
    writes = sum(
        1
        for s in store.walk(marker_dir("job"))
        if s.name.startswith("MARKERS") and s.name[7:].isdigit()
    )
    assert writes <= 20  # at most num_threads MARKERS files, whatever the number of markers
    assert read_marker_type(store, marker_dir("job")) == "TIMELINE_SERVER_BASED"
    health = MarkerClient(service.url, TOKEN).health()
    assert health["ok"]
    # the 32 threads' creates travelled together: far fewer requests than markers
    batches = health["service"].get("marker_create_batch", 0)
    singles = health["service"].get("marker_create", 0)
    assert batches > 0 and batches + singles < 400 / 4


def test_kill_9_loses_no_acknowledged_marker(tmp_path):
    """Repeat with random kill points: every marker the service acknowledged is found again,
    by a restarted service (lazy load) and straight from the files."""
    table = str(tmp_path / "table")
    store = open_store(table)
    rng = random.Random(7)
    acknowledged: set[str] = set()
    for round_ in range(4):
        with MarkerServiceProcess(table, token=TOKEN, batch_interval_ms=10) as svc:
            client = MarkerClient(svc.url, TOKEN, timeout=5)
            stop = threading.Event()
            lock = threading.Lock()

            def writer(w: int, client=client, stop=stop, lock=lock, round_=round_) -> None:
                i = 0
                while not stop.is_set():
                    name = marker_name(f"p={w}", f"r{round_}-w{w}-{i}.parquet")
                    try:
                        if client.create(marker_dir("job"), name):
                            with lock:
                                acknowledged.add(name)
                    except Exception:
                        return
                    i += 1

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.1, 0.6))
            svc.kill()  # SIGKILL mid-flight
            stop.set()
            for t in threads:
                t.join()
        on_disk = {
            m for names in read_marker_files(store, marker_dir("job")).values() for m in names
        }
        assert acknowledged <= on_disk, len(acknowledged - on_disk)
    assert len(acknowledged) > 50
    with MarkerServiceProcess(table, token=TOKEN) as svc:
        assert acknowledged <= set(MarkerClient(svc.url, TOKEN).all(marker_dir("job")))


def test_fallback_to_direct_when_unreachable(tmp_path, caplog):
    store = open_store(str(tmp_path / "t"))
    m = ServiceMarkers(MarkerClient("http://127.0.0.1:9", TOKEN, timeout=1), store, marker_dir("j"))
    with caplog.at_level("WARNING", logger="dataferry.markers"):
        assert m.create("p", "a.parquet") and m.create("p", "b.parquet")
    assert sum("unreachable" in r.message for r in caplog.records) == 1  # says so once
    assert m.data_paths() == {"p/a.parquet", "p/b.parquet"}


def raw_request(
    url: str, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> int:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request(method, path, body=body, headers=headers)
    status = conn.getresponse().status
    conn.close()
    return status


def test_malformed_requests_get_4xx_and_service_keeps_serving(service):
    auth = {"X-Dataferry-Token": TOKEN, "Content-Type": "application/json"}
    cases = [
        ("POST", "/v1/markers/create", b"not json", auth, 400),
        (
            "POST",
            "/v1/markers/create",
            json.dumps({"dir": "../../etc", "name": "x.marker.CREATE"}).encode(),
            auth,
            400,
        ),
        (
            "POST",
            "/v1/markers/create",
            json.dumps({"dir": marker_dir("j"), "name": "nomarker"}).encode(),
            auth,
            400,
        ),
        ("POST", "/v1/markers/create", b"x" * 100_000, auth, 413),
        (
            "POST",
            "/v1/markers/create",
            json.dumps({"dir": marker_dir("j"), "name": "a.marker.CREATE"}).encode(),
            {"X-Dataferry-Token": "wrong"},
            401,
        ),
        ("GET", "/v1/nothing", None, auth, 404),
    ]
    for method, path, body, headers, status in cases:
        assert raw_request(service.url, method, path, body, headers) == status, path
    assert MarkerClient(service.url, TOKEN).create(marker_dir("j"), "p/a.marker.CREATE")


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


def test_in_process_service_and_stats(tmp_path):
    store = open_store(str(tmp_path))
    with MarkerService(store, MarkerServiceConfig(batch_interval_ms=5)) as svc:
        client = MarkerClient(svc.url)
        assert client.create(marker_dir("x"), "a.marker.CREATE")
        assert client.all(marker_dir("x")) == ["a.marker.CREATE"]
        assert client.delete(marker_dir("x"))
        assert svc.stats.counter("marker_batches") >= 1


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
