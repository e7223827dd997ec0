"""The marker service, as a real subprocess on loopback, under hostile and unlucky clients:
after each abuse it answers a correct request, and nothing escapes a handler."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid

import pytest

from dataferry.markers import MarkerClient, ServiceMarkers, marker_dir
from dataferry.markers.files import read_marker_files
from dataferry.store import open_store

from .conftest import (
    TOKEN,
    dial,
    exchange,
    http_status,
    markers_ok,
    no_unhandled_errors,
    read_all,
)

DIR = marker_dir("job-1")


@pytest.fixture
def markers(start_service):
    return start_service("markers")


def post(path: str, body: bytes, token: str = TOKEN, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {token}\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def create(name: str) -> bytes:
    return post("/v1/markers/create", json.dumps({"dir": DIR, "name": name}).encode())


@pytest.mark.parametrize(
    "name",
    [
        ".marker.CREATE",  # no data file: `cleanup` failed on it every time
        "_SUCCESS.marker.CREATE",  # the table's own _SUCCESS would have been deleted
        "x.marker.BOGUS",  # an unknown type: the job commit raised a bare ValueError
        "p=1/.hidden.marker.CREATE",
        "evil.marker.CREATE\n",
        "a/../../b.marker.CREATE",
        "a\\b.marker.CREATE",
    ],
)
def test_names_no_writer_makes_are_refused(markers, name):
    assert http_status(exchange(markers, create(name))) == 400
    batch = json.dumps(
        {"dir": DIR, "names": ["ok/a-job-1-t0-a0.parquet.marker.CREATE", name]}
    ).encode()
    assert http_status(exchange(markers, post("/v1/markers/create_batch", batch))) == 400
    client = MarkerClient(markers.address, TOKEN)
    assert client.all(DIR) == []  # a refused batch created nothing, not even its good names
    markers_ok(markers)


def test_random_bytes_and_malformed_heads_are_answered(markers):
    rng = random.Random(16)
    for _ in range(20):
        junk = bytes(rng.choice(b"ABCXYZ \x00\xff\x01/") for _ in range(rng.randint(1, 2000)))
        assert http_status(exchange(markers, junk + b"\r\n\r\n")) == 400
    cases = {
        b"GET /v1/health HTTP/1.1\r\nno colon here\r\n\r\n": 400,
        b"POST /v1/markers/create HTTP/1.1\r\nX-Dataferry-Token: "
        + TOKEN.encode()
        + b"\r\n\r\n": 411,
        post("/v1/markers/create", b"{}", extra="Transfer-Encoding: chunked\r\n"): 501,
        b"GET / HTTP/1.1\r\nX-Dataferry-Token: \xff\xfe\r\n\r\n": 401,
        b"GET / HTTP/1.1\r\nX: " + b"y" * 40_000 + b"\r\n\r\n": 431,
        post("/v1/markers/create", b'{"dir": Infinity, "name": 1e400}'): 400,
        post("/v1/markers/create", b"[" * 5000): 400,
        post("/v1/markers/create", b"\xff\xfe"): 400,
    }
    for data, status in cases.items():
        assert http_status(exchange(markers, data)) == status, data[:60]
    markers_ok(markers)
    no_unhandled_errors(markers)


def test_truncated_bodies_and_huge_lengths(markers):
    head = post("/v1/markers/create", b"x" * 100)
    exchange(markers, head[:-90])  # the peer hangs up mid-body: nothing to answer
    exchange(markers, head[:10])  # or mid-head
    for length in (2**64 - 1, 10**30, 70_000):
        data = (
            f"POST /v1/markers/create HTTP/1.1\r\nX-Dataferry-Token: {TOKEN}\r\n"
            f"Content-Length: {length}\r\n\r\n"
        ).encode()
        assert http_status(exchange(markers, data)) == (413 if length < 10**20 else 400)
    for length in ("-1", "+5", "1_0", " ", "0x10"):
        data = post("/v1/markers/create", b"", extra="").replace(
            b"Content-Length: 0", f"Content-Length: {length}".encode()
        )
        assert http_status(exchange(markers, data)) == 400, length
    # a wrong token is answered before the body is read (and never after reading it)
    assert http_status(exchange(markers, post("/v1/markers/create", b"x" * 60_000, "no"))) == 401
    markers_ok(markers)
    no_unhandled_errors(markers)


def test_slow_clients_are_dropped_in_time(markers):
    silent = [dial(markers) for _ in range(20)]
    idle = dial(markers)
    idle.sendall(b"GET /v1/health HTTP/1.1\r\nX-Dataferry-Token: " + TOKEN.encode() + b"\r\n\r\n")
    stalled = dial(markers)
    stalled.sendall(post("/v1/markers/create", b"x" * 100)[:-50])
    start = time.monotonic()
    for s in silent:
        assert read_all(s) == b""
    assert http_status(read_all(idle)) == 200  # answered, then closed once idle
    assert http_status(read_all(stalled)) == 408
    assert time.monotonic() - start < 8
    for s in [*silent, idle, stalled]:
        s.close()
    markers_ok(markers)


def test_thousands_of_connections_from_one_client_do_not_lock_out_others(start_service):
    markers = start_service("markers", limits={"max_connections_per_client": 100})
    flood = []
    try:
        for _ in range(2000):
            try:
                flood.append(dial(markers, source="127.0.0.2", timeout=5))
            except OSError:
                break
        assert len(flood) >= 1000
        health = markers_ok(markers)  # from 127.0.0.1, while the flood is open
        assert health["connections"] <= 100 + 1
    finally:
        for s in flood:
            s.close()
    markers_ok(markers)


def test_accepts_again_after_descriptor_exhaustion(start_service):
    markers = start_service("markers", nofile=128)
    socks = [dial(markers, timeout=5) for _ in range(200)]
    time.sleep(0.5)
    for s in socks:
        s.close()
    deadline = time.monotonic() + 20
    while True:
        try:
            health = markers_ok(markers)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert markers.alive
    assert health["net"]["accept_paused"] >= 1  # it did run out, and came back
    no_unhandled_errors(markers)


def test_a_batch_of_long_non_ascii_names_succeeds(start_service, tmp_path):
    """400 files under a long Japanese partition value: sized in bytes (as sent), the batch is
    split under the service's cap, and every marker goes through the service."""
    markers = start_service("markers")
    table = open_store(str(tmp_path / "markers"))
    client = MarkerClient(markers.address, TOKEN)
    job = ServiceMarkers(client, table, DIR)
    partition = "地域=" + "東京都千代田区丸の内一丁目" * 6
    files = [
        (partition, f"part-{i:05d}-{uuid.uuid4().hex}-job-1-t0-a0.parquet") for i in range(400)
    ]
    assert job.create_many(files) == [True] * 400
    assert len(job.all()) == 400
    assert job.direct.all() == set()  # none fell back to direct markers
    assert sum(len(v) for v in read_marker_files(table, DIR).values()) == 400
    # the same through concurrent single creates (the process's batcher)
    more = [(partition, f"more-{i}-job-1-t0-a0.parquet") for i in range(200)]
    threads = [threading.Thread(target=job.create, args=f) for f in more]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(job.all()) == 600 and job.direct.all() == set()


def test_an_oversized_request_falls_back_to_direct_markers(start_service, tmp_path):
    markers = start_service("markers", max_request_bytes=256)
    table = open_store(str(tmp_path / "markers"))
    job = ServiceMarkers(MarkerClient(markers.address, TOKEN), table, DIR)
    long_name = "n" * 200 + "-job-1-t0-a0.parquet"
    assert job.create("p=1", long_name) is True  # 413 from the service: a direct marker
    assert job.direct.all() == {f"p=1/{long_name}.marker.CREATE"}
    files = [("p=2", f"f{i}-" + "m" * 40 + "-job-1-t0-a0.parquet") for i in range(20)]
    assert job.create_many(files) == [True] * 20  # 413: halved until under the service's cap
    assert len(job.all()) == 21 and len(job.direct.all()) == 1


def test_idle_directories_are_dropped_from_memory(start_service):
    """20,000 `exists` on new directories: the service keeps at most max_directories."""
    markers = start_service("markers", max_directories=64, state_idle_s=60.0)
    client = MarkerClient(markers.address, TOKEN)

    def ask(first: int) -> None:
        for i in range(first, 20_000, 4):
            path = "/v1/markers/exists?dir=" + marker_dir(f"job-{i}") + "&name=a.marker.CREATE"
            assert client.request("GET", path)["exists"] is False

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    time.sleep(0.3)
    assert client.health()["directories"] <= 64 + 4
    markers_ok(markers)


def test_directories_idle_past_state_idle_s_are_dropped_and_come_back(start_service):
    """Directories unused for `state_idle_s` leave memory though far under max_directories;
    a dropped directory's markers are on the store and come back on its next use."""
    markers = start_service("markers", state_idle_s=1.0)  # max_directories: 1024
    client = MarkerClient(markers.address, TOKEN)
    kept = marker_dir("kept")
    assert client.create(kept, "p=1/a-kept-t0-a0.parquet.marker.CREATE")
    for i in range(20):  # read-only requests make directory state too
        path = "/v1/markers/exists?dir=" + marker_dir(f"ro-{i}") + "&name=a.marker.CREATE"
        assert client.request("GET", path)["exists"] is False
    assert client.health()["directories"] == 21  # within the second: all still held
    deadline = time.monotonic() + 10
    while (health := client.health())["directories"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert health["directories"] == 0, health
    assert health["service"]["directories_dropped"] == 21
    assert client.all(kept) == [
        "p=1/a-kept-t0-a0.parquet.marker.CREATE"
    ]  # loaded again from its file
    assert client.health()["directories"] == 1
    markers_ok(markers)


def test_kill_9_mid_flood_loses_no_acknowledged_marker(start_service, tmp_path):
    markers = start_service("markers")
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def flood(seed: int) -> None:
        rng = random.Random(seed)
        client = MarkerClient(markers.address, TOKEN, timeout=5)
        while not stop.is_set():
            name = f"p={seed}/{rng.randrange(10**12)}-job-1-t0-a0.parquet.marker.CREATE"
            try:
                if client.create(DIR, name):
                    with lock:
                        acknowledged.append(name)
                with dial(markers, timeout=5) as s:
                    s.sendall(rng.randbytes(500))
            except Exception:
                time.sleep(0.01)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    port = int(markers.address.rpartition(":")[2])
    markers.kill()  # SIGKILL, mid-flood
    with lock:
        before = list(acknowledged)
    assert len(before) > 10
    table = open_store(str(tmp_path / "markers"))
    on_disk = {m for names in read_marker_files(table, DIR).values() for m in names}
    assert set(before) <= on_disk  # readable without the service
    markers.options["port"] = port
    markers.start()
    stop.set()
    for t in threads:
        t.join(10)
    assert set(acknowledged) <= set(MarkerClient(markers.address, TOKEN).all(DIR))
    markers_ok(markers)
    no_unhandled_errors(markers)
