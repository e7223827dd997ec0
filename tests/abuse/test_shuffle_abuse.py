"""The shuffle service, as a real subprocess on loopback, under hostile and unlucky clients:
after each abuse it answers a correct request, and nothing escapes a handler."""

from __future__ import annotations

import pathlib
import random
import socket
import threading
import time

import pytest

from dataferry.shuffle import PushCode, ShuffleClient, frame, unframe
from dataferry.shuffle.files import decode_offsets, merged_files
from dataferry.shuffle.protocol import PREFIX, Msg, prefix
from dataferry.store import LocalStore

from .conftest import (
    HELLO,
    TOKEN,
    app_hello,
    dial,
    exchange,
    frame_of,
    frames,
    no_unhandled_errors,
    read_all,
    register,
    rss_mib,
    shuffle_ok,
)

MiB = 1024 * 1024


@pytest.fixture
def shuffle(start_service):
    return start_service("shuffle")


def refusal(raw: bytes) -> dict:
    """The ERROR answer in what the service sent (after an OK to a HELLO, if any)."""
    errors = [h for kind, h in frames(raw) if kind == Msg.ERROR]
    assert errors, raw[:200]
    return errors[0]


def test_random_bytes_get_an_error_answer(shuffle):
    rng = random.Random(16)
    for _ in range(30):
        junk = rng.randbytes(rng.randint(1, 4096))
        if junk[:2] == b"DS":
            junk = b"X" + junk
        assert refusal(exchange(shuffle, junk))["status"] == 400
    for _ in range(10):  # random bytes after a good HELLO: still an answer, never a hang
        junk = b"DS" + rng.randbytes(rng.randint(20, 2048))
        got = frames(exchange(shuffle, HELLO + junk))
        assert got[0] == (Msg.OK, {})
    shuffle_ok(shuffle)
    no_unhandled_errors(shuffle)


def test_truncated_frames_and_huge_lengths(shuffle):
    truncated = [
        HELLO[:5],  # half a prefix
        prefix(Msg.HELLO, 100, 0) + b'{"tok',  # half a header
        HELLO + prefix(Msg.PUSH, 2, 1000) + b"{}" + b"x" * 10,  # half a payload
    ]
    for data in truncated:
        exchange(shuffle, data)  # the peer hangs up mid-frame: nothing to answer
    big = 2**64 - 1
    assert refusal(exchange(shuffle, prefix(Msg.HELLO, 2, big) + b"{}"))["status"] == 401
    assert refusal(exchange(shuffle, prefix(Msg.HELLO, 2**32 - 1, 0)))["status"] == 401
    assert refusal(exchange(shuffle, HELLO + prefix(Msg.PUSH, 2, big)))["status"] == 413
    assert refusal(exchange(shuffle, HELLO + prefix(Msg.STATS, 2**32 - 1, 0)))["status"] == 413
    shuffle_ok(shuffle)
    no_unhandled_errors(shuffle)


@pytest.mark.parametrize(
    "header",
    [
        b'{"token": Infinity}',
        b'{"token": NaN}',
        b'{"token": 1e400}',
        '{"token": "tōken"}'.encode(),
        b'{"token": "\\ud800"}',
        b'{"token": "\xff\xfe"}',
        b"[" * 5000 + b"]" * 5000,
        b'["token"]',
    ],
)
def test_bad_hello_headers_are_answered(shuffle, header):
    assert refusal(exchange(shuffle, frame_of(Msg.HELLO, header)))["status"] in (400, 401)
    shuffle_ok(shuffle)
    no_unhandled_errors(shuffle)


def test_bad_requests_after_hello_are_answered_and_the_connection_goes_on(shuffle):
    bad = [
        (
            Msg.FETCH,
            b'{"app": "a", "shuffle": 1e400, "map": 0, "attempt": 0, "start": 0, "end": 1}',
        ),
        (Msg.FETCH, b'{"app": "a", "shuffle": Infinity, "map": 0, "attempt": 0, "start": 0}'),
        (Msg.FINALIZE, {"app": "a", "shuffle": -1, "merge_id": 0}),
        (Msg.FINALIZE, {"app": "a", "shuffle": 2**70, "merge_id": 0}),
        (Msg.FINALIZE, {"app": "evil\n", "shuffle": 0, "merge_id": 0}),
        (Msg.FINALIZE, {"app": "../up", "shuffle": 0, "merge_id": 0}),
        (Msg.FINALIZE, {"app": ["a"], "shuffle": 0, "merge_id": 0}),
        (Msg.PUSH, {"app": "a", "shuffle": 0, "merge_id": 0, "blocks": [[0, 1]]}),
        (Msg.PUSH, {"app": "a", "shuffle": 0, "merge_id": 0, "blocks": [[0, 1, "x"]]}),
        (Msg.PUSH, {"app": "a", "shuffle": 0, "merge_id": 0, "blocks": 7}),
        (Msg.MERGED_CHUNK, {"app": "a", "shuffle": 0, "merge_id": 0, "reduce": True, "chunk": 0}),
        (Msg.MERGED_PARTITION, {"app": "a", "shuffle": 0, "merge_id": 0, "reduce": -3}),
        (Msg.MERGED_PARTITION, {"app": "a\n", "shuffle": 0, "merge_id": 0, "reduce": 0}),
        (Msg.PUSH_DONE, {"app": "a", "shuffle": 0, "merge_id": 0, "map": 2**70}),
        (Msg.PUSH_DONE, {"app": "a", "shuffle": 0, "merge_id": 0, "map": "0"}),
        (Msg.PUSH_DONE, {"app": "a", "shuffle": 0, "merge_id": 0}),
        (Msg.PUSHED, {"app": "a", "shuffle": 0.5, "merge_id": 0}),
        (Msg.PUSHED, {"app": "../a", "shuffle": 0, "merge_id": 0}),
        (99, {}),
    ]
    creds = register(shuffle, "a")  # requests on app a's data come with its credential
    with dial(shuffle) as s:
        s.sendall(app_hello(shuffle, creds))
        for msg, header in bad:
            s.sendall(frame_of(msg, header))
        s.sendall(frame_of(Msg.STATS, {}))
        s.shutdown(socket.SHUT_WR)
        answers = frames(read_all(s))
    assert answers[0] == (Msg.OK, {})
    statuses = [h.get("status") for kind, h in answers[1:-1]]
    assert statuses == [400] * len(bad), answers
    assert answers[-1][0] == Msg.OK and "stats" in answers[-1][1]  # the connection went on
    node = pathlib.Path(shuffle.command[1])  # the node's shuffle directory
    assert not any(node.glob("evil*")) and not (node.parent / "up").exists()
    shuffle_ok(shuffle)
    no_unhandled_errors(shuffle)


def test_unauthenticated_connections_allocate_nothing(shuffle):
    """30 connections that never say HELLO but announce 16 MiB each: the service refuses them
    before reading (or allocating) a payload, and its memory stays small."""
    socks = []
    idle_rss = rss_mib(shuffle.pid)
    try:
        for _ in range(30):
            s = dial(shuffle)
            s.sendall(frame_of(Msg.PUSH, {"app": "a", "shuffle": 0, "merge_id": 0}, 16 * MiB))
            s.sendall(b"\0" * 65536)  # and start sending it
            socks.append(s)
        time.sleep(0.5)
        flood_rss = rss_mib(shuffle.pid)
        print(f"shuffle service RSS: {idle_rss:.0f} MiB idle, {flood_rss:.0f} MiB under the flood")
        assert flood_rss < 100
        for s in socks:
            s.settimeout(5)
            assert refusal(read_all(s, 4096))["status"] == 401
        # announced by a HELLO too: refused before the payload
        hello_big = prefix(Msg.HELLO, len(HELLO) - PREFIX.size, 16 * MiB) + HELLO[PREFIX.size :]
        assert refusal(exchange(shuffle, hello_big))["status"] == 401
        assert rss_mib(shuffle.pid) < 100
    finally:
        for s in socks:
            s.close()
    shuffle_ok(shuffle)


def test_slow_clients_are_dropped_in_time(shuffle):
    """Silent connections (before HELLO, and idle after it) and a stalled request are closed
    by the service's timeouts (1 s read, 1.5 s idle here), not held forever."""
    silent = [dial(shuffle) for _ in range(20)]
    idle = dial(shuffle)
    idle.sendall(HELLO)
    stalled = dial(shuffle)
    stalled.sendall(HELLO + prefix(Msg.PUSH, 2, 1000) + b"{}" + b"x" * 10)
    start = time.monotonic()
    for s in silent:
        s.settimeout(10)
        assert read_all(s) == b""
    assert frames(read_all(idle)) == [(Msg.OK, {})]
    answers = frames(read_all(stalled))
    assert answers[-1][1]["status"] == 408
    assert time.monotonic() - start < 8
    for s in [*silent, idle, stalled]:
        s.close()
    counters = shuffle_ok(shuffle)
    assert counters["connections_timed_out"] >= 22


def test_thousands_of_connections_from_one_client_do_not_lock_out_others(start_service):
    """2,000 connections from one address (127.0.0.2): past the cap they close each other
    (the oldest silent one gives way), so the address never holds more than the cap, and a
    client on another address is served meanwhile."""
    shuffle = start_service("shuffle", limits={"max_connections_per_client": 100})
    flood = []
    try:
        for _ in range(2000):
            try:
                flood.append(dial(shuffle, source="127.0.0.2", timeout=5))
            except OSError:
                break
        assert len(flood) >= 1000
        counters = shuffle_ok(shuffle)  # from 127.0.0.1, while the flood is open
        assert counters["connections_evicted"] >= len(flood) - 100
    finally:
        for s in flood:
            s.close()
    shuffle_ok(shuffle)


def test_accepts_again_after_descriptor_exhaustion(start_service):
    """Run with 128 descriptors; 200 connections take them all; once they close, the service
    accepts and answers again (it used to stop accepting for good)."""
    shuffle = start_service("shuffle", nofile=128)
    socks = []
    for _ in range(200):
        s = dial(shuffle, timeout=5)
        socks.append(s)
    deadline = time.monotonic() + 5
    with ShuffleClient(shuffle.address, TOKEN, timeout=1) as probe:
        while time.monotonic() < deadline:  # until the service has run out of descriptors
            try:
                probe.service_stats()
                probe.close()
            except Exception:
                break
            time.sleep(0.05)
    for s in socks:
        s.close()
    deadline = time.monotonic() + 20
    while True:
        try:
            counters = shuffle_ok(shuffle)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert counters["accept_paused"] >= 1  # it did run out, and came back
    # logged when it ran out, not at every retry
    warnings = shuffle.stderr_tail(100_000).count("cannot accept connections")
    assert warnings == 1 or 1 <= warnings < counters["accept_paused"]
    assert shuffle.alive
    no_unhandled_errors(shuffle)


def test_kill_9_mid_flood_loses_no_merged_block(start_service):
    """Finalized merges survive a kill -9 that lands mid-flood (pushes and garbage at once)."""
    shuffle = start_service("shuffle")
    blocks = [(m, r, frame(m, r, bytes([m + r]) * 300)) for m in range(8) for r in range(3)]
    creds = register(shuffle, "app")
    with ShuffleClient(shuffle.address, credentials=creds) as c:
        assert set(c.push("app", 0, 0, blocks)) == {PushCode.SUCCESS}
        statuses = c.finalize("app", 0, 0)
    assert sorted(s.reduce_id for s in statuses) == [0, 1, 2]
    expected = {r: b"".join(b for m, rr, b in blocks if rr == r) for r in range(3)}

    stop = threading.Event()

    def flood(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            try:
                with ShuffleClient(shuffle.address, timeout=5, credentials=creds) as c:
                    m = rng.randint(0, 10**6)
                    c.push("app", 1, 0, [(m, 0, frame(m, 0, rng.randbytes(2000)))])
                with dial(shuffle, timeout=5) as s:
                    s.sendall(rng.randbytes(3000))
            except Exception:
                time.sleep(0.01)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    port = int(shuffle.address.rpartition(":")[2])
    shuffle.kill()  # SIGKILL, mid-flood
    shuffle.options["port"] = port
    shuffle.start()
    stop.set()
    for t in threads:
        t.join(10)
    # what the finalize acknowledged is on disk, whole: the merged data of every reduce, and
    # an index whose chunks split it at block boundaries
    node = LocalStore(shuffle.command[1])
    for r in range(3):
        data, index, _ = merged_files("app", 0, 0, r)
        merged = node.read_bytes(data)
        assert merged == expected[r]
        offsets = decode_offsets(node.read_bytes(index), index)
        assert offsets[0] == 0 and offsets[-1] == len(merged)
        assert [b.map_index for b in unframe(merged)] == list(range(8))
    shuffle_ok(shuffle)  # and the restarted service serves
    no_unhandled_errors(shuffle)
