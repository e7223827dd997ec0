"""Pushes reuse their connections, and a TLS answer sends its file range whole.

Across hosts every push is a TLS connection; opening one per map output and merger cost the
pushers and the services more CPU than the bytes they moved, and serving a file range through
asyncio's TLS `sendfile` fallback hopped to a thread every 256 KiB.
"""

from __future__ import annotations

import asyncio

import pytest

from dataferry.shuffle import (
    PushTarget,
    ShuffleClient,
    ShuffleServiceProcess,
    push_map_output,
    register_app,
    write_map_output,
)
from dataferry.shuffle import send_range as send_range_module
from dataferry.shuffle.client_pool import ClientPool, process_clients
from dataferry.stats import IOStatistics
from dataferry.store import LocalStore

TOKEN = "reuse-token"
APP = "app-reuse"


@pytest.fixture
def merger(tmp_path):
    with ShuffleServiceProcess(str(tmp_path / "merger"), TOKEN) as svc:
        svc.creds = register_app(APP, [svc.address], TOKEN)
        yield svc


def accepted(svc) -> int:
    with ShuffleClient(svc.address, TOKEN) as c:
        return c.service_stats()["counters"]["connections_accepted"]


def test_pushes_of_one_process_share_a_connection_per_merger(merger, tmp_path):
    """Five map outputs pushed one after another open one connection to their merger, and
    every block is merged. Breaking it: a TLS handshake per map output and merger, which
    across hosts cost the pushers and the services more CPU than the pushed bytes."""
    store = LocalStore(str(tmp_path / "maps"))
    target = PushTarget(APP, 1, 0, 4, (merger.address,), credentials=merger.creds)
    process_clients().close()
    before = accepted(merger)
    stats = IOStatistics()
    for m in range(5):
        offsets = write_map_output(store, APP, 1, m, 0, [bytes([m, r]) * 300 for r in range(4)])
        report = push_map_output(store, target, m, 0, offsets, stats)
        assert report.blocks == 4 and not report.unreachable
    # one connection for the pushes, one for this count
    assert accepted(merger) - before == 2
    assert stats.counter("push_connections_reused") == 4


def test_a_kept_connection_the_service_dropped_is_opened_again(merger, tmp_path):
    """A merger restarted or closing idle connections: the next push reconnects instead of
    failing. Breaking it: after the service closes a kept connection, every later push to it
    reports the merger unreachable and its blocks are read unmerged."""
    store = LocalStore(str(tmp_path / "maps"))
    target = PushTarget(APP, 2, 0, 2, (merger.address,), credentials=merger.creds)
    pool = process_clients()
    pool.close()
    offsets = write_map_output(store, APP, 2, 0, 0, [b"a" * 100, b"b" * 100])
    assert push_map_output(store, target, 0, 0, offsets).blocks == 2
    for kept in pool._idle.values():
        for client in kept:
            client._sock.close()  # as if the service had closed it
            client._sock = None
    offsets = write_map_output(store, APP, 2, 1, 0, [b"c" * 100, b"d" * 100])
    report = push_map_output(store, target, 1, 0, offsets)
    assert report.blocks == 2 and not report.unreachable


def test_a_client_that_failed_is_closed_not_kept():
    """An exception in the push drops its client (its stream may be mid-frame). Breaking
    it: the next push reads the previous request's answer as its own."""
    pool = ClientPool()
    with pytest.raises(RuntimeError), pool.client("127.0.0.1:1", IOStatistics()):
        raise RuntimeError("mid-request")
    assert pool.idle() == 0
    with pool.client("127.0.0.1:1", IOStatistics()):
        pass
    assert pool.idle() == 1
    pool.close()
    assert pool.idle() == 0


class _Sink:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, *parts) -> None:
        self.sent.extend(bytes(p) for p in parts)


def test_a_tls_range_is_sent_in_whole_pieces(tmp_path, monkeypatch):
    """The range goes out exactly, in pieces of SEND_PIECE; a file shorter than the answer
    announced drops the connection. Breaking it: a reader gets bytes of the wrong place, or a
    short file leaves the client waiting for bytes that never come."""
    store = LocalStore(str(tmp_path))
    data = bytes(range(256)) * 40
    store.write_bytes("f", data)
    monkeypatch.setattr(send_range_module, "SEND_PIECE", 1000)
    sink = _Sink()
    asyncio.run(send_range_module.send_range(sink, store, None, "f", 123, 5000))
    assert b"".join(sink.sent) == data[123:5123]
    assert [len(p) for p in sink.sent] == [1000] * 5
    with pytest.raises(ConnectionAbortedError):
        asyncio.run(send_range_module.send_range(_Sink(), store, None, "f", 9000, 5000))
