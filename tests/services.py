"""Services started as real subprocesses (with a test's limits), raw sockets to send them
anything, and the checks every test of them ends with: the footing of the abuse suite
(tests/abuse) and of the network tests (tests/net), whose conftests import `start_service`."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import sys
import uuid
from collections.abc import Callable

import pytest

from dataferry.markers import MarkerClient, marker_dir
from dataferry.net import ServiceProcess
from dataferry.shuffle import AppCredentials, ShuffleClient, register_app
from dataferry.shuffle.protocol import PREFIX, Msg, prefix

TOKEN = "abuse-token"
RUNNER = os.path.join(os.path.dirname(__file__), "abuse", "serve.py")
FAST = {"read_timeout_s": 1.0, "idle_timeout_s": 1.5}  # slow clients are dropped in seconds
TOKEN_ENV = {"shuffle": "DATAFERRY_SHUFFLE_TOKEN", "markers": "DATAFERRY_MARKER_TOKEN"}


def _nofile(n: int) -> Callable[[], None]:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return lower


@pytest.fixture
def start_service(tmp_path):
    """start_service("shuffle"|"markers", nofile=N, tls=identity, host=H, limits={...}, **config):
    a running service process; every one is killed at the end of the test, after checking
    that nothing escaped its handlers (`no_unhandled_errors`), whatever the test did."""
    procs: list[ServiceProcess] = []

    def start(
        kind: str,
        *,
        nofile: int = 0,
        tls=None,
        host: str = "",
        limits: dict | None = None,
        **config,
    ) -> ServiceProcess:
        config["limits"] = {**FAST, **(limits or {})}
        proc = ServiceProcess(
            [kind, str(tmp_path / kind)],
            TOKEN,
            TOKEN_ENV[kind],
            f"{kind} service",
            host=host,
            tls=tls,
            program=[sys.executable, RUNNER],
            preexec_fn=_nofile(nofile) if nofile else None,
            config=json.dumps(config),
        )
        procs.append(proc)
        return proc.start()

    yield start
    escaped = []
    for proc in procs:
        if proc.alive:
            try:
                no_unhandled_errors(proc)
            except AssertionError as e:
                escaped.append(f"{proc.what}: {e}")
        proc.kill(signal.SIGKILL)
    assert not escaped, "\n".join(escaped)


def host_port(proc: ServiceProcess) -> tuple[str, int]:
    address = proc.address.split("://")[-1]
    host, _, port = address.rpartition(":")
    return host, int(port)


def dial(proc: ServiceProcess, source: str = "", timeout: float = 10.0) -> socket.socket:
    """A raw connection to the service (from `source`, another loopback address, if given)."""
    source_address = (source, 0) if source else None
    return socket.create_connection(host_port(proc), timeout=timeout, source_address=source_address)


def read_all(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    """Everything the service sends until it closes (or `limit` bytes)."""
    got = b""
    try:
        while len(got) < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    return got


def exchange(proc: ServiceProcess, data: bytes, half_close: bool = True) -> bytes:
    with dial(proc) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        return read_all(s)


def frames(raw: bytes) -> list[tuple[int, dict]]:
    """The shuffle service's answers in `raw`: (message type, header) each."""
    out, pos = [], 0
    while pos + PREFIX.size <= len(raw):
        magic, kind, hlen, plen = PREFIX.unpack(raw[pos : pos + PREFIX.size])
        assert magic == b"DS", raw[pos : pos + 16]
        out.append((kind, json.loads(raw[pos + PREFIX.size : pos + PREFIX.size + hlen] or b"{}")))
        pos += PREFIX.size + hlen + plen
    return out


def frame_of(msg: Msg, header: dict | bytes, payload_len: int = 0) -> bytes:
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return prefix(msg, len(head), payload_len) + head


HELLO = frame_of(Msg.HELLO, {"token": TOKEN})  # the service-wide token: registers, reads stats


def register(proc: ServiceProcess, app: str) -> AppCredentials:
    """Register an application on the shuffle service; its credentials there."""
    return register_app(app, [proc.address], TOKEN, fingerprint=proc.fingerprint)


def app_hello(proc: ServiceProcess, creds: AppCredentials) -> bytes:
    """The HELLO frame of a connection that speaks for `creds.app`."""
    return frame_of(Msg.HELLO, {"app": creds.app, "secret": creds.secret_for(proc.address)})


def http_status(raw: bytes) -> int:
    assert raw.startswith(b"HTTP/1.1 "), raw[:80]
    return int(raw.split(b" ", 2)[1])


def shuffle_ok(proc: ServiceProcess) -> dict:
    """A correct request is answered (and the service's counters come back)."""
    with ShuffleClient(proc.address, TOKEN, timeout=10, fingerprint=proc.fingerprint) as c:
        return c.service_stats()["counters"]


def markers_ok(proc: ServiceProcess) -> dict:
    """A correct create is answered and durable; the service's health comes back."""
    client = MarkerClient(proc.address, TOKEN, timeout=10, fingerprint=proc.fingerprint)
    name = f"p=1/{uuid.uuid4().hex}-ok-t0-a0.parquet.marker.CREATE"  # the job "ok"'s file
    assert client.create(marker_dir("ok"), name) is True
    assert name in client.all(marker_dir("ok"))
    return client.health()


# what the services log when a handler raised instead of answering: the accept loop's
# catch-all ("connection from HOST failed: ...") and the shuffle service's ("request N failed")
HANDLER_FAILED = re.compile(r"connection from \S+ failed: |request \S+ failed: ")


def no_unhandled_errors(proc: ServiceProcess) -> None:
    """Nothing escaped a handler: no traceback, no task exception left unretrieved, and no
    exception that only the server's last-resort catch-all stopped."""
    tail = proc.stderr_tail(100_000)
    assert "Task exception was never retrieved" not in tail, tail[-2000:]
    assert "Traceback" not in tail, tail[-2000:]
    assert not HANDLER_FAILED.search(tail), tail[-2000:]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")
