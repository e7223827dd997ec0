"""The marker service's HTTP (h11 under the asyncio server), spoken over raw sockets to an
in-process service: a malformed head is answered 400 and its connection closed, and a good
connection is kept alive across requests."""

from __future__ import annotations

import json
import re
import socket

import pytest

from dataferry.markers import MarkerService, MarkerServiceConfig, marker_dir
from dataferry.net import ConnectionLimits
from dataferry.store import open_store

TOKEN = "t0ken"
HEALTH = f"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\n\r\n".encode()


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    store = open_store(str(tmp_path_factory.mktemp("table")))
    limits = ConnectionLimits(read_timeout_s=2.0, idle_timeout_s=2.0)
    config = MarkerServiceConfig(batch_interval_ms=5, token=TOKEN, limits=limits)
    with MarkerService(store, config) as svc:
        yield svc


def talk(service: MarkerService, data: bytes) -> bytes:
    """Send `data`, then read until the service closes the connection."""
    host, _, port = service.url.removeprefix("http://").rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(data)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    return got


def answers(raw: bytes) -> list[int]:
    """The statuses of the HTTP answers in `raw`, in order (a body runs into the next)."""
    return [int(status) for status in re.findall(rb"HTTP/1\.1 ([0-9]{3}) ", raw)]


def post_create(headers: str, body: bytes) -> bytes:
    return (
        f"POST /v1/markers/create HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\n"
        f"{headers}\r\n"
    ).encode() + body


BODY = json.dumps({"dir": marker_dir("j"), "name": "p/a-j-t0-a0.marker.CREATE"}).encode()


@pytest.mark.parametrize(
    "head",
    [
        f"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\nno colon\r\n\r\n",
        f"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\nBad : x\r\n\r\n",
        f"GET /v1/health HTTP/1.1\r\nHost: x\r\nHost: y\r\nX-Dataferry-Token: {TOKEN}\r\n\r\n",
        f"get /v1/health HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\n\r\n",
        f"GET /v1/health HTTP/2.0\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\n\r\n",
        "GET  /v1/health HTTP/1.1\r\n\r\n",
    ],
    ids=["no-colon", "space-before-colon", "two-hosts", "lower-case-method", "http2", "spaces"],
)
def test_a_malformed_head_is_answered_400_and_the_connection_closed(service, head):
    # a good request after it on the same connection is never read: the stream is not trusted
    assert answers(talk(service, head.encode() + HEALTH)) == [400]


@pytest.mark.parametrize(
    "lengths", ["Content-Length: 5\r\nContent-Length: 7\r\n", "Content-Length: 5, 7\r\n"]
)
def test_two_content_length_values_are_answered_400_and_the_connection_closed(service, lengths):
    assert answers(talk(service, post_create(lengths, BODY) + HEALTH)) == [400]


def test_keep_alive_answers_requests_in_turn_then_closes_when_asked(service):
    create = post_create(f"Content-Length: {len(BODY)}\r\n", BODY)
    last = HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
    raw = talk(service, create + HEALTH + create + last)
    assert answers(raw) == [200, 200, 200, 200]
    assert raw.count(b'{"created": true}') == 1 and raw.count(b'{"created": false}') == 1
    assert raw.rstrip().endswith(b"}")  # every answer whole, then the close


def test_the_token_is_checked_before_the_body_is_read(service):
    wrong = post_create("Content-Length: 60000\r\n", b"").replace(TOKEN.encode(), b"nope")
    assert answers(talk(service, wrong)) == [401]  # answered without any of the body sent


def test_a_request_no_endpoint_answers_is_refused_in_words(service):
    """Each (method, path) has one handler in the service's table; any other gets 404 naming
    the path, or 405 naming the method, and the connection goes on. Breaking it: a client of
    a newer service version gets a 500 or a hang instead of learning what is missing."""
    head = "HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: " + TOKEN + "\r\n"
    raw = talk(
        service,
        f"GET /v1/markers/nothing {head}\r\n".encode()
        + f"PUT /v1/markers/create {head}Content-Length: 0\r\n\r\n".encode()
        + f"GET /v1/markers/create {head}\r\n".encode()
        + HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"),
    )
    assert answers(raw) == [404, 405, 404, 200]
    assert b"no such endpoint /v1/markers/nothing" in raw
    assert b"method PUT not allowed" in raw
    assert b"no such endpoint /v1/markers/create" in raw
