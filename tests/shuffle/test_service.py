"""The shuffle service as a real subprocess on loopback: pushes, finalize, reads and refusals."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from pyroaring import BitMap

from dataferry.errors import ShuffleServiceUnavailable
from dataferry.shuffle import (
    MapStatus,
    MergedPartition,
    PushCode,
    PushConfig,
    PushTarget,
    ReduceInput,
    ServiceRefused,
    ShuffleClient,
    ShuffleServiceProcess,
    frame,
    plan_requests,
    push_map_output,
    read_reduce,
    register_app,
    write_map_output,
)
from dataferry.shuffle.files import merged_files
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.shuffle.protocol import PREFIX, Msg, prefix
from dataferry.store import LocalStore

TOKEN = "sh-token"
APP = "app-t"


@pytest.fixture
def node(tmp_path):
    with ShuffleServiceProcess(str(tmp_path / "node"), TOKEN, max_deferred_bytes=4096) as svc:
        svc.creds = register_app(APP, [svc.address], TOKEN)
        yield svc


def payload(m: int, r: int, n: int = 200) -> bytes:
    return bytes([(m + r) % 256]) * n


def test_push_finalize_and_read_merged(node):
    c = ShuffleClient(node.address, credentials=node.creds)
    blocks = [(m, 0, frame(m, 0, payload(m, 0))) for m in range(5)]
    assert c.push(APP, 0, 0, blocks) == [PushCode.SUCCESS] * 5
    # a retried map pushes again: acknowledged and dropped
    assert c.push(APP, 0, 0, blocks[:2]) == [PushCode.DUPLICATE] * 2
    (status,) = c.finalize(APP, 0, 0)
    assert status.bitmap == BitMap(range(5))
    index, meta = c.merged_meta(APP, 0, 0, 0)
    assert len(index) == 16 and BitMap.deserialize(bytes(meta)) == BitMap(range(5))
    assert bytes(c.merged_chunk(APP, 0, 0, 0, 0)) == b"".join(b for _, _, b in blocks)
    assert c.push(APP, 0, 0, [(9, 0, frame(9, 0, b"x"))]) == [PushCode.TOO_LATE]
    assert c.push(APP, 1, 3, [(0, 0, frame(0, 0, b"x"))]) == [PushCode.SUCCESS]
    assert c.push(APP, 1, 2, [(1, 0, frame(1, 0, b"x"))]) == [PushCode.STALE]
    # a block that lies about its map, or is not framed, is refused and not merged
    assert c.push(APP, 1, 3, [(1, 0, frame(2, 0, b"x")), (1, 0, b"junk")]) == [
        PushCode.CORRUPT,
        PushCode.CORRUPT,
    ]


def test_refusals_keep_the_service_serving(node):
    host, _, port = node.address.rpartition(":")

    def raw(data: bytes) -> bytes:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            got = b""
            while chunk := s.recv(65536):
                got += chunk
            return got

    def answer(data: bytes) -> dict:
        """The service's refusal (after an OK for a good HELLO, if one was sent)."""
        got, pos = raw(data), 0
        while pos < len(got):
            _, kind, hlen, plen = PREFIX.unpack(got[pos : pos + PREFIX.size])
            header = json.loads(got[pos + PREFIX.size : pos + PREFIX.size + hlen])
            if kind == Msg.ERROR:
                return header
            pos += PREFIX.size + hlen + plen
        raise AssertionError("no refusal")

    hello = json.dumps({"token": TOKEN}).encode()
    ok_hello = prefix(Msg.HELLO, len(hello), 0) + hello
    assert answer(b"GET / HTTP/1.1\r\n\r\n")["status"] == 400  # not our frames
    assert answer(prefix(Msg.HELLO, 2, 0) + b"{}")["status"] == 401  # no token
    assert answer(ok_hello[:0] + prefix(Msg.STATS, 0, 0))["status"] == 401
    oversized = answer(ok_hello + prefix(Msg.PUSH, 2, 1 << 40) + b"{}")
    assert oversized["status"] == 413
    assert answer(ok_hello + prefix(Msg.PUSH, 5, 0) + b"{nope")["status"] == 400
    assert answer(ok_hello + prefix(Msg.FETCH, 2, 0) + b"{}")["status"] == 400  # fields missing
    with pytest.raises(ServiceRefused, match="401"):
        ShuffleClient(node.address, "wrong").service_stats()
    # and after all of that it still serves
    stats = ShuffleClient(node.address, credentials=node.creds).service_stats()
    assert stats["counters"]["frames_refused"] >= 3
    assert stats["counters"]["requests_unauthorized"] >= 2


def _push_all_at_once(node, shuffle_id: int, maps: int, reduces: int) -> None:
    """Every map of one shuffle pushes at the same moment, then each reduce reads back every
    block exactly once (BUSY answers were retried, never lost)."""
    target = PushTarget(
        APP,
        shuffle_id,
        0,
        reduces,
        (node.address,),
        node.creds,
        PushConfig(retries=12, retry_wait_s=0.02),
    )
    store = LocalStore(node.directory)
    offsets = {
        m: write_map_output(
            store, APP, shuffle_id, m, 0, [payload(m, r, 1500) for r in range(reduces)]
        )
        for m in range(maps)
    }
    reports = {}
    start = threading.Barrier(maps)

    def mapper(m: int) -> None:
        start.wait()
        reports[m] = push_map_output(store, target, m, 0, offsets[m])

    threads = [threading.Thread(target=mapper, args=(m,)) for m in range(maps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    c = ShuffleClient(node.address, credentials=node.creds)
    statuses = {s.reduce_id: s for s in c.finalize(APP, shuffle_id, 0)}
    for r in range(reduces):
        inp = ReduceInput(
            APP,
            shuffle_id,
            0,
            r,
            tuple(MapStatus(m, 0, node.address, block_sizes(offsets[m])) for m in range(maps)),
            MergedPartition(r, node.address, statuses[r].bitmap, statuses[r].size)
            if r in statuses
            else None,
            node.creds,
        )
        blocks, _ = read_reduce(inp)
        assert [b.map_index for b in blocks] == list(range(maps))
        assert all(bytes(b.payload) == payload(b.map_index, r, 1500) for b in blocks)
    merged = sum(len(s.bitmap) for s in statuses.values())
    assert merged == sum(rep.blocks for rep in reports.values()) > 0


def test_bounded_deferred_memory_under_many_pushers(node):
    """Many mappers push the same partitions at once: memory waiting for a partition's writer
    never exceeds the service's bound (excess is answered BUSY and retried), and every block
    is merged exactly once.

    Whether two pushes of one partition meet inside the service is up to the scheduler (on a
    busy 2-core machine one round may see none), so rounds repeat until one has; each round
    is checked whole."""
    c = ShuffleClient(node.address, credentials=node.creds)
    for round_ in range(8):
        _push_all_at_once(node, 5 + round_, maps=48, reduces=4)
        stats = c.service_stats()
        assert stats["maximums"].get("deferred_bytes_peak", 0) <= 4096
        if stats["counters"].get("push_deferred", 0) > 0:
            break
    assert stats["counters"].get("push_deferred", 0) > 0, "no push ever waited for a writer"


def test_plan_requests_follow_the_rules():
    cfg = PushConfig(max_block_size_to_push=1000, max_block_batch_size=2500)
    target = PushTarget(APP, 0, 0, 8, ("a:1", "b:2"), config=cfg)
    sizes = [900, 0, 900, 900, 2000, 100, 100, 100]
    offsets = [0]
    for s in sizes:
        offsets.append(offsets[-1] + s)
    reqs = plan_requests(target, offsets)
    got = [(r.merger, [b for b, _ in r.blocks]) for r in reqs]
    # reduces 0-3 go to merger 0, 4-7 to merger 1; reduce 1 is empty, reduce 4 is too large;
    # a batch stays under 2500 bytes
    assert got == [(0, [0, 2]), (0, [3]), (1, [5, 6, 7])]
    for r in reqs:
        assert r.size <= cfg.max_block_batch_size
        assert r.start == offsets[r.blocks[0][0]]


def test_corrupted_merged_chunk_falls_back_to_originals(node):
    store = LocalStore(node.directory)
    maps = 6
    offsets = {m: write_map_output(store, APP, 7, m, 0, [payload(m, 0, 3000)]) for m in range(maps)}
    target = PushTarget(APP, 7, 0, 1, (node.address,), node.creds)
    for m in range(maps):
        push_map_output(store, target, m, 0, offsets[m])
    (status,) = ShuffleClient(node.address, credentials=node.creds).finalize(APP, 7, 0)
    data, _, _ = merged_files(APP, 7, 0, 0)
    raw = bytearray(store.read_bytes(data))
    raw[len(raw) // 2] ^= 0x55  # one flipped byte in the middle of the merged file
    store.write_bytes(data, bytes(raw))
    inp = ReduceInput(
        APP,
        7,
        0,
        0,
        tuple(MapStatus(m, 0, node.address, block_sizes(offsets[m])) for m in range(maps)),
        MergedPartition(0, node.address, status.bitmap, status.size),
        node.creds,
    )
    blocks, report = read_reduce(inp)
    assert report.fallback_chunks == 1 and report.fallback_maps == maps
    assert [bytes(b.payload) for b in blocks] == [payload(m, 0, 3000) for m in range(maps)]


def test_unreachable_merger_stops_pushes_to_it(tmp_path):
    store = LocalStore(str(tmp_path))
    offsets = write_map_output(store, APP, 0, 0, 0, [payload(0, r) for r in range(4)])
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{dead.getsockname()[1]}"
    dead.close()  # nothing listens there
    report = push_map_output(store, PushTarget(APP, 0, 0, 4, (address,)), 0, 0, offsets)
    assert report.unreachable == [address] and report.blocks == 0
    with pytest.raises(ShuffleServiceUnavailable):
        ShuffleClient(address).service_stats()


def test_remove_deletes_a_shuffles_files(node):
    store = LocalStore(node.directory)
    write_map_output(store, APP, 9, 0, 0, [b"abc"])
    c = ShuffleClient(node.address, credentials=node.creds)
    c.push(APP, 9, 0, [(0, 0, frame(0, 0, b"abc"))])
    c.finalize(APP, 9, 0)
    assert store.walk(f"{APP}/shuffle_9")
    assert c.remove(APP, 9)
    assert not store.exists(f"{APP}/shuffle_9")


def test_unknown_message_types_are_answered_by_name_and_the_connection_goes_on(tmp_path):
    """Every message type has one handler in the service's table; a type it has none for
    gets a 400 naming the type (and, for one no client can send, what the service answers),
    and the connection keeps serving. Breaking it: a client speaking a newer protocol gets a
    bare 'bad request' or a closed connection, with no hint of what was not understood."""
    from dataferry.shuffle import ShuffleService

    def frame_of(msg: int, header: dict) -> bytes:
        head = json.dumps(header).encode()
        return prefix(msg, len(head), 0) + head

    with ShuffleService(LocalStore(str(tmp_path / "node"))) as svc:
        host, port = svc.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(frame_of(Msg.HELLO, {}) + frame_of(99, {}) + frame_of(Msg.OK, {}))
            s.sendall(frame_of(Msg.STATS, {}))
            s.shutdown(socket.SHUT_WR)
            raw = b""
            while chunk := s.recv(65536):
                raw += chunk
    answers, pos = [], 0
    while pos < len(raw):
        _, kind, hlen, plen = PREFIX.unpack(raw[pos : pos + PREFIX.size])
        answers.append((kind, json.loads(raw[pos + PREFIX.size : pos + PREFIX.size + hlen])))
        pos += PREFIX.size + hlen + plen
    assert [kind for kind, _ in answers] == [Msg.OK, Msg.ERROR, Msg.ERROR, Msg.OK]
    unknown, reply_kind = answers[1][1], answers[2][1]
    assert unknown["status"] == 400 and "unknown message type 99" in unknown["error"]
    assert "PUSH, FINALIZE" in unknown["error"]  # what it does answer
    assert reply_kind["status"] == 400 and "unknown message type 100 (OK)" in reply_kind["error"]
    assert "stats" in answers[3][1]


def test_stop_drops_the_disk_work_queued_behind_a_slow_call(tmp_path):
    """stop() waits for the I/O call in progress, never for the calls queued behind it: their
    requests' connections are already closed, nobody would read the answers. Breaking it: a
    stopped service (SIGTERM) first works through every merge, finalize and sweep queued
    behind one slow store call, and its process lingers for all of them."""
    import threading

    from dataferry.shuffle import ShuffleService

    svc = ShuffleService(LocalStore(str(tmp_path / "node")), io_threads=1).start()
    release, ran = threading.Event(), []
    svc._io.submit(release.wait, 10)  # the slow call in progress on the one I/O thread
    svc._io.submit(ran.append, "queued")
    real_shutdown = svc._io.shutdown

    def shutdown(wait=True, *, cancel_futures=False):
        real_shutdown(wait=False, cancel_futures=cancel_futures)  # the queue as stop leaves it
        release.set()  # only then does the slow call end
        real_shutdown(wait=wait)

    svc._io.shutdown = shutdown
    svc.stop()
    assert ran == []
