"""Fair admission per address, on both services (real subprocesses on loopback): slow
connections that never authenticate, from the very address a legitimate task uses, cannot
keep that task out. At the per-address cap (small here: 8) a new connection is let in by
closing the oldest silent connection of the address (`dataferry.net.admission`)."""

from __future__ import annotations

import socket
import time

import pytest

from dataferry.markers import MarkerClient, marker_dir
from dataferry.shuffle.protocol import PREFIX, Msg

from .conftest import HELLO, TOKEN, dial, frame_of, frames, http_status, shuffle_ok

CAP = 8
SLOW = 30  # from the task's own address, more than the cap: the service's cap is reached
# slow connections are held for the whole test (not dropped by a short read timeout)
LIMITS = {"max_connections_per_client": CAP, "read_timeout_s": 30.0, "idle_timeout_s": 30.0}
HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: " + TOKEN.encode() + b"\r\n\r\n"
BEGUN = {"markers": b"POST /v1/markers/create HTTP/1.1\r\n", "shuffle": b"DS"}  # never finished


def slow_flood(proc, kind: str) -> list[socket.socket]:
    """SLOW connections from 127.0.0.1 that begin a request and never finish it, accepted by
    the service in the order they were opened."""
    socks = []
    for _ in range(SLOW):
        s = dial(proc, timeout=5)
        s.sendall(BEGUN[kind])
        socks.append(s)
        time.sleep(0.01)  # accepted in this order (the age the service closes them by)
    time.sleep(0.3)
    return socks


def closed(sock: socket.socket) -> bool:
    """Whether the service closed the connection (it never sends on these; a close it made
    has arrived by the time the task was answered)."""
    sock.settimeout(0.1)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def assert_oldest_closed(socks: list[socket.socket], kept: int) -> None:
    """The newest `kept` slow connections are open, every older one was closed."""
    state = [closed(s) for s in socks]
    assert state == [True] * (len(socks) - kept) + [False] * kept, state


def answer_kind(sock: socket.socket) -> int:
    """The message type of the shuffle service's next answer (read whole)."""
    sock.settimeout(5)
    got = b""
    while len(got) < PREFIX.size or len(got) < PREFIX.size + sum(
        PREFIX.unpack(got[: PREFIX.size])[2:]
    ):
        chunk = sock.recv(65536)
        assert chunk, "the connection was closed"
        got += chunk
    return PREFIX.unpack(got[: PREFIX.size])[1]


def health(sock: socket.socket) -> int:
    sock.sendall(HEALTH)
    sock.settimeout(5)
    return http_status(sock.recv(65536))


@pytest.mark.parametrize("kind", ["markers", "shuffle"])
def test_a_task_is_answered_within_a_second_under_slow_connections_from_its_address(
    start_service, kind
):
    """A task on a host where something holds slow connections past the cap gets in at once.
    Without eviction its connection is reset at the cap and, on the marker service, the task
    falls back to direct markers (on the shuffle service its pushes and reads fail) for as
    long as the slow connections last (30 s each by default)."""
    proc = start_service(kind, limits=LIMITS)
    flood = slow_flood(proc, kind)
    try:
        start = time.monotonic()
        if kind == "markers":
            client = MarkerClient(proc.address, TOKEN, timeout=5)
            assert (
                client.create(marker_dir("fair"), "p=1/a-fair-t0-a0.parquet.marker.CREATE") is True
            )
            assert client.health()["net"]["connections_evicted"] == SLOW - CAP + 1
        else:
            assert shuffle_ok(proc)["connections_evicted"] == SLOW - CAP + 1
        assert time.monotonic() - start < 1.0
        assert_oldest_closed(flood, CAP - 1)  # the task took the place of the oldest
    finally:
        for s in flood:
            s.close()


def test_an_idle_authenticated_marker_connection_outlives_silent_ones(start_service):
    """A task's kept-alive connection, idle between its requests, is not the one closed when
    silent connections of its address pile up: they close each other, oldest first. Closing
    it instead would make the task reconnect into the flood for every request."""
    proc = start_service("markers", limits=LIMITS)
    with dial(proc) as task:
        assert health(task) == 200  # authenticated, now idle
        flood = slow_flood(proc, "markers")
        try:
            assert health(task) == 200  # the same connection: it was not closed
            assert_oldest_closed(flood, CAP - 1)
        finally:
            for s in flood:
                s.close()


def test_an_idle_authenticated_shuffle_connection_outlives_silent_ones(start_service):
    """The same on the shuffle service: a connection that said HELLO with the token and is
    idle keeps its place while silent connections of its address close each other."""
    proc = start_service("shuffle", limits=LIMITS)
    stats = frame_of(Msg.STATS, {})
    with dial(proc) as task:
        task.sendall(HELLO)
        assert frames(task.recv(4096)) == [(Msg.OK, {})]
        flood = slow_flood(proc, "shuffle")
        try:
            task.sendall(stats)
            assert answer_kind(task) == Msg.OK
            assert_oldest_closed(flood, CAP - 1)
        finally:
            for s in flood:
                s.close()
