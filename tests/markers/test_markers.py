"""Markers: direct ones, and the marker service as a real subprocess on loopback (the direct
committer that uses them is tested in tests/commit/direct)."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

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
        created = list(
            pool.map(lambda i: m.create(f"p={i % 4}", f"f{i}-job-t0-a0.parquet"), range(400))
        )
    assert all(created)
    assert not m.create("p=0", "f0-job-t0-a0.parquet")  # already exists
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
                    name = marker_name(f"p={w}", f"r{round_}-w{w}-{i}-job-t0-a0.parquet")
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
    assert MarkerClient(service.url, TOKEN).create(marker_dir("j"), "p/a-j-t0-a0.marker.CREATE")


def test_in_process_service_and_stats(tmp_path):
    store = open_store(str(tmp_path))
    with MarkerService(store, MarkerServiceConfig(batch_interval_ms=5)) as svc:
        client = MarkerClient(svc.url)
        assert client.create(marker_dir("x"), "a-x-t0-a0.marker.CREATE")
        assert client.all(marker_dir("x")) == ["a-x-t0-a0.marker.CREATE"]
        assert client.delete(marker_dir("x"))
        assert svc.stats.counter("marker_batches") >= 1


def test_direct_markers_in_one_batch(tmp_path):
    """With `batch`, the markers of the files an attempt announces are one file naming them
    all (no directory per partition); read back like the others, and deleted with them."""
    store = open_store(str(tmp_path))
    m = DirectMarkers(store, marker_dir("j"), batch=True)
    assert m.batches
    assert m.create_many([("p=1", "a.parquet"), ("p=2", "b.parquet")]) == [True, True]
    m.create("p=3", "c.parquet")  # a file opened later: a marker of its own
    (batch,) = [s for s in store.list(marker_dir("j")) if not s.is_dir]
    assert batch.name.startswith("BATCH-")
    assert not store.exists(f"{marker_dir('j')}/p=1")
    assert m.data_paths() == {"p=1/a.parquet", "p=2/b.parquet", "p=3/c.parquet"}
    m.delete_all()
    assert m.all() == set()
