"""Two applications on one shuffle service (a real subprocess), one service-wide token: each
application's data answers only to that application's own credential.

The tenancy table these tests verify (request on application A's data x credential -> answer):

    request                      A's credential   B's credential   token only   no HELLO
    PUSH, PUSH_DONE, PUSHED      OK               403              403          401
    FINALIZE                     OK               403              403          401
    MERGED_META/PARTITION/CHUNK  OK               403              403          401
    FETCH (map outputs)          OK               403              403          401
    REMOVE, UNREGISTER           OK               403              403          401
    HELLO as A, wrong secret     401 (and closed)
    REGISTER A while A is live   409 (with the token); 403 on an application's connection
"""

from __future__ import annotations

import pathlib
import socket

import pytest
from pyroaring import BitMap

from dataferry.shuffle import (
    MapStatus,
    MergedPartition,
    PushCode,
    PushTarget,
    ReduceInput,
    ServiceRefused,
    ShuffleClient,
    frame,
    push_map_output,
    read_reduce,
    write_map_output,
)
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.shuffle.protocol import Msg
from dataferry.store import LocalStore

from .conftest import (
    HELLO,
    TOKEN,
    app_hello,
    dial,
    frame_of,
    frames,
    no_unhandled_errors,
    read_all,
    register,
    shuffle_ok,
)

MAPS = 4


def node_store(proc) -> LocalStore:
    return LocalStore(proc.command[1])  # the node's shuffle directory


def block(m: int, r: int = 0, fill: int = 0) -> bytes:
    return frame(m, r, bytes([(m + fill) % 256]) * 300)


def pushes_of(app: str, shuffle: int, merge_id: int, blocks: list[tuple[int, int, bytes]]):
    """A PUSH frame as it travels on the wire (header, then the blocks)."""
    header = {
        "app": app,
        "shuffle": shuffle,
        "merge_id": merge_id,
        "blocks": [[m, r, len(b)] for m, r, b in blocks],
    }
    payload = b"".join(b for _, _, b in blocks)
    return frame_of(Msg.PUSH, header, len(payload)) + payload


def data_requests(app: str) -> list[tuple[str, bytes]]:
    """One request of every kind on `app`'s data (shuffle 0, merge 0), as raw frames; the push
    is a forged block with a valid checksum, and the merge id of one is higher than A's."""
    ids = {"app": app, "shuffle": 0, "merge_id": 0}
    part = {**ids, "reduce": 0}
    return [
        ("push", pushes_of(app, 0, 0, [(0, 0, block(0, fill=99))])),
        ("push-higher-merge", pushes_of(app, 0, 7, [(0, 0, block(0, fill=99))])),
        ("push_done", frame_of(Msg.PUSH_DONE, {**ids, "merge_id": 7, "map": 0})),
        ("pushed", frame_of(Msg.PUSHED, ids)),
        ("finalize", frame_of(Msg.FINALIZE, ids)),
        ("finalize-higher-merge", frame_of(Msg.FINALIZE, {**ids, "merge_id": 7})),
        ("merged_meta", frame_of(Msg.MERGED_META, part)),
        ("merged_partition", frame_of(Msg.MERGED_PARTITION, part)),
        ("merged_chunk", frame_of(Msg.MERGED_CHUNK, {**part, "chunk": 0})),
        (
            "fetch",
            frame_of(
                Msg.FETCH, {"app": app, "shuffle": 0, "map": 0, "attempt": 0, "start": 0, "end": 1}
            ),
        ),
        ("remove", frame_of(Msg.REMOVE, {"app": app, "shuffle": 0})),
        ("unregister", frame_of(Msg.UNREGISTER, {"app": app})),
    ]


def answers(proc, hello: bytes, requests: list[bytes]) -> list[tuple[int, dict]]:
    """The answers to `requests` sent on one connection after `hello` (its answer dropped)."""
    with dial(proc) as s:
        s.sendall(hello + b"".join(requests))
        s.shutdown(socket.SHUT_WR)
        got = frames(read_all(s))
    assert got[0] == (Msg.OK, {}), got[:2]
    return got[1:]


@pytest.fixture
def tenants(start_service):
    """A service with application A's shuffle 0 pushed, finalized and its map outputs on
    disk, and application B registered beside it."""
    proc = start_service("shuffle")
    a, b = register(proc, "app-a"), register(proc, "app-b")
    store = node_store(proc)
    offsets = {
        m: write_map_output(store, "app-a", 0, m, 0, [bytes([m]) * 300]) for m in range(MAPS)
    }
    blocks = [(m, 0, block(m)) for m in range(MAPS)]
    with ShuffleClient(proc.address, credentials=a) as c:
        assert c.push("app-a", 0, 0, blocks) == [PushCode.SUCCESS] * MAPS
        (status,) = c.finalize("app-a", 0, 0)
    assert status.bitmap == BitMap(range(MAPS))
    return proc, a, b, offsets, blocks, status


def assert_a_intact(proc, a, offsets, blocks, status) -> None:
    """A's merge, merged data and map outputs are as A left them."""
    with ShuffleClient(proc.address, credentials=a) as c:
        (again,) = c.finalize("app-a", 0, 0)  # the same merge id answers the same: not STALE
        assert again.bitmap == status.bitmap and again.size == status.size
        _, _, data = c.merged_partition("app-a", 0, 0, 0)
        assert bytes(data) == b"".join(b for _, _, b in blocks)  # no forged block in it
        assert c.pushed_maps("app-a", 0, 0) == BitMap()  # nobody said PUSH_DONE for A
    maps = tuple(MapStatus(m, 0, proc.address, block_sizes(offsets[m])) for m in range(MAPS))
    merged = MergedPartition(0, proc.address, status.bitmap, status.size)
    got, report = read_reduce(ReduceInput("app-a", 0, 0, 0, maps, merged, a))
    assert [bytes(x.payload) for x in got] == [bytes([m]) * 300 for m in range(MAPS)]
    assert report.merged_blocks == MAPS and report.fallback_chunks == 0


def test_another_applications_credential_is_refused_for_every_request(tenants):
    proc, a, b, offsets, blocks, status = tenants
    requests = data_requests("app-a")
    got = answers(proc, app_hello(proc, b), [r for _, r in requests])
    assert [(name, h.get("status")) for (name, _), (_, h) in zip(requests, got, strict=True)] == [
        (name, 403) for name, _ in requests
    ]
    assert_a_intact(proc, a, offsets, blocks, status)
    no_unhandled_errors(proc)


def test_the_service_wide_token_alone_is_refused_for_every_request(tenants):
    proc, a, _, offsets, blocks, status = tenants
    requests = data_requests("app-a")
    got = answers(proc, HELLO, [r for _, r in requests])
    assert [(name, h.get("status")) for (name, _), (_, h) in zip(requests, got, strict=True)] == [
        (name, 403) for name, _ in requests
    ]
    # without any HELLO: 401 and closed, for every one of them
    for name, request in requests:
        with dial(proc) as s:
            s.sendall(request)
            s.shutdown(socket.SHUT_WR)
            (kind, header), *_ = frames(read_all(s))
        assert (name, kind, header["status"]) == (name, Msg.ERROR, 401)
    assert_a_intact(proc, a, offsets, blocks, status)
    shuffle_ok(proc)  # the token still reads statistics
    no_unhandled_errors(proc)


def test_the_applications_own_credential_is_answered(tenants):
    """The same requests with A's own credential: answered (the control of the two above)."""
    proc, a, _, _, _, _ = tenants
    requests = dict(data_requests("app-a"))
    order = ["pushed", "finalize", "merged_meta", "merged_partition", "merged_chunk", "fetch"]
    got = answers(proc, app_hello(proc, a), [requests[n] for n in order])
    assert [kind for kind, _ in got] == [Msg.OK] * len(order), got
    got = answers(proc, app_hello(proc, a), [requests["remove"], requests["unregister"]])
    assert got == [(Msg.OK, {"removed": True}), (Msg.OK, {"removed": True})]
    assert not (pathlib.Path(proc.command[1]) / "app-a").exists()


def test_a_wrong_secret_or_a_second_registration_is_refused(tenants):
    proc, a, b, _, _, _ = tenants
    forged = frame_of(Msg.HELLO, {"app": "app-a", "secret": b.secret_for(proc.address)})
    for hello in (forged, frame_of(Msg.HELLO, {"app": "app-a", "token": TOKEN})):
        with dial(proc) as s:
            s.sendall(hello)
            s.shutdown(socket.SHUT_WR)
            assert frames(read_all(s))[0][1]["status"] == 401
    with pytest.raises(ServiceRefused, match="409"):
        register(proc, "app-a")  # A is live: B cannot take its id over
    register_on_app = frame_of(Msg.REGISTER, {"app": "app-c"})
    assert answers(proc, app_hello(proc, b), [register_on_app])[0][1]["status"] == 403
    # once A unregisters (with its own credential), its old credential opens nothing and
    # the id may be registered afresh
    with ShuffleClient(proc.address, credentials=a) as c:
        assert c.unregister("app-a")
    with pytest.raises(ServiceRefused, match="401"):
        ShuffleClient(proc.address, credentials=a).pushed_maps("app-a", 0, 0)
    fresh = register(proc, "app-a")
    assert fresh.secret_for(proc.address) != a.secret_for(proc.address)
    no_unhandled_errors(proc)


def test_replayed_pushes_are_refused(tenants):
    """A's captured push, replayed: on B's connection refused before any block is looked at;
    on A's own, every block is a DUPLICATE and nothing is merged again."""
    proc, a, b, offsets, blocks, status = tenants
    captured = pushes_of("app-a", 0, 0, blocks)
    assert answers(proc, app_hello(proc, b), [captured])[0][1]["status"] == 403
    # the shuffle is finalized: a replay of a fresh shuffle's push shows the DUPLICATE rule
    fresh = pushes_of("app-a", 5, 0, blocks)
    (_, first), (_, replay) = answers(proc, app_hello(proc, a), [fresh, fresh])
    assert first["codes"] == [PushCode.SUCCESS] * MAPS
    assert replay["codes"] == [PushCode.DUPLICATE] * MAPS
    with ShuffleClient(proc.address, credentials=a) as c:
        (merged,) = c.finalize("app-a", 5, 0)
        assert merged.size == sum(len(x) for _, _, x in blocks)  # merged once
    assert_a_intact(proc, a, offsets, blocks, status)


def test_registrations_survive_a_restart(tenants):
    """A restarted service (kill -9) knows its applications again from its directory: A's
    credential still reads A's map outputs, B's is still refused, and neither id is free."""
    proc, a, b, offsets, _, _ = tenants
    port = int(proc.address.rpartition(":")[2])
    proc.kill()
    proc.options["port"] = port
    proc.start()
    maps = tuple(MapStatus(m, 0, proc.address, block_sizes(offsets[m])) for m in range(MAPS))
    got, _ = read_reduce(ReduceInput("app-a", 0, 0, 0, maps, None, a))
    assert [bytes(x.payload) for x in got] == [bytes([m]) * 300 for m in range(MAPS)]
    fetch = dict(data_requests("app-a"))["fetch"]
    assert answers(proc, app_hello(proc, b), [fetch])[0][1]["status"] == 403
    for creds in (a, b):
        with pytest.raises(ServiceRefused, match="409"):
            register(proc, creds.app)
    no_unhandled_errors(proc)


# --- quotas ----------------------------------------------------------------------------------


def test_a_push_over_the_bytes_quota_falls_back_to_map_outputs(start_service):
    """A's merged bytes are capped at two blocks' worth: its pusher is answered QUOTA, stops
    pushing there, and its reducer reads the rest from the map outputs; B is not affected."""
    proc = start_service("shuffle", app_max_merged_bytes=2 * len(block(0)) + 10)
    a, b = register(proc, "app-a"), register(proc, "app-b")
    store = node_store(proc)
    for creds in (a, b):
        app = creds.app
        offsets = {
            m: write_map_output(store, app, 0, m, 0, [bytes([m]) * 300]) for m in range(MAPS)
        }
        target = PushTarget(app, 0, 0, 1, (proc.address,), creds)
        reports = [push_map_output(store, target, m, 0, offsets[m]) for m in range(MAPS)]
        assert sum(r.blocks for r in reports) == 2
        assert [r.over_quota for r in reports] == [[], [], [proc.address], [proc.address]]
        with ShuffleClient(proc.address, credentials=creds) as c:
            (status,) = c.finalize(app, 0, 0)
        assert status.bitmap == BitMap([0, 1])
        maps = tuple(MapStatus(m, 0, proc.address, block_sizes(offsets[m])) for m in range(MAPS))
        merged = MergedPartition(0, proc.address, status.bitmap, status.size)
        got, report = read_reduce(ReduceInput(app, 0, 0, 0, maps, merged, creds))
        assert [bytes(x.payload) for x in got] == [bytes([m]) * 300 for m in range(MAPS)]
        assert report.merged_blocks == 2 and report.original_blocks == 2
    assert shuffle_ok(proc)["push_quota"] == 4


def test_pending_merges_and_connections_are_capped_per_application(start_service):
    proc = start_service("shuffle", app_max_pending_merges=1, app_max_connections=2)
    a, b = register(proc, "app-a"), register(proc, "app-b")
    with ShuffleClient(proc.address, credentials=a) as c:
        assert c.push("app-a", 0, 0, [(0, 0, block(0))]) == [PushCode.SUCCESS]
        assert c.push("app-a", 1, 0, [(0, 0, block(0))]) == [PushCode.QUOTA]  # a second merge
        c.finalize("app-a", 0, 0)
        assert c.push("app-a", 1, 0, [(0, 0, block(0))]) == [PushCode.SUCCESS]  # room again
        with ShuffleClient(proc.address, credentials=a) as second:
            second.pushed_maps("app-a", 1, 0)  # two connections of A are open now
            with pytest.raises(ServiceRefused, match="429"):
                ShuffleClient(proc.address, credentials=a).pushed_maps("app-a", 1, 0)
            with ShuffleClient(proc.address, credentials=b) as other:  # B has its own cap
                assert other.push("app-b", 0, 0, [(0, 0, block(0))]) == [PushCode.SUCCESS]
    no_unhandled_errors(proc)
