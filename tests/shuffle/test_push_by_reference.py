"""Push by reference: a merger on the map output's host is told where the blocks are in the map
output file (PUSH_REF) and finds them itself, in its own directory or a peer's it was
introduced to (PEERS); a merger that does not know the holder is sent the bytes instead. It
merges a stub naming where each block lies (`merge_by_reference`, the default), which the
reader resolves and checks, or copies the bytes."""

from __future__ import annotations

import functools
import random
from collections import Counter
from contextlib import ExitStack
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from dataferry.engine.shuffle import LocalShuffle, LocalShuffleConfig
from dataferry.errors import CorruptShuffleData
from dataferry.shuffle import (
    DriverConfig,
    MapStatus,
    PushCode,
    PushConfig,
    ReduceInput,
    ServiceRefused,
    ShuffleClient,
    ShuffleDriver,
    ShuffleService,
    ShuffleServiceConfig,
    push_map_output,
    read_reduce,
    register_app,
    write_map_output,
)
from dataferry.shuffle.blocks import HEADER, REF_BODY, REF_MAGIC, BlockRef, ref_stub, unframe
from dataferry.shuffle.files import merged_files
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.stats import IOStatistics
from dataferry.store import LocalStore

TOKEN = "ref-token"
APP = "app-ref"
OTHER = "app-other"
MAPS, REDUCES = 3, 4


def payload(m: int, r: int) -> bytes:
    """A block's payload, different for every (map, reduce), of varied lengths."""
    return random.Random(m * 1000 + r).randbytes(200 + 37 * r + 11 * m)


def counters(svc: ShuffleService) -> dict[str, int]:
    return svc.snapshot()["counters"]


def stub_size(holder: str) -> int:
    return HEADER.size + REF_BODY.size + len(holder.encode())


@pytest.fixture(params=[True, False], ids=["stubs", "copies"])
def pair(request, tmp_path):
    """Two in-process services on loopback (one host), each over its own directory, the app
    registered on both; they merge blocks pushed by reference as stubs, or copy them."""
    with ExitStack() as stack:
        services = []
        for name in ("a", "b"):
            directory = str(tmp_path / name)
            config = ShuffleServiceConfig(token=TOKEN, merge_by_reference=request.param)
            svc = stack.enter_context(ShuffleService(LocalStore(directory), config))
            svc.directory = directory
            svc.stubs = request.param
            services.append(svc)
        creds = register_app(APP, [s.address for s in services], TOKEN)
        for svc in services:
            svc.creds = creds
        yield services


def introduce(a: ShuffleService, b: ShuffleService) -> None:
    """Each told the other's directory: one in process, one over the wire with the token."""
    assert b.introduce({a.address: a.directory}) == 1
    with ShuffleClient(a.address, TOKEN) as c:
        assert c.introduce({b.address: b.directory}) == 1


def write_maps(svc: ShuffleService, app: str, shuffle: int) -> dict[int, list[int]]:
    """MAPS map outputs of REDUCES blocks each, in the service's directory; their offsets."""
    store = LocalStore(svc.directory)
    return {
        m: write_map_output(store, app, shuffle, m, 0, [payload(m, r) for r in range(REDUCES)])
        for m in range(MAPS)
    }


def push_maps_of_a(
    a: ShuffleService, shuffle: int, mergers: list[str], push: PushConfig
) -> tuple[ShuffleDriver, dict[int, list[int]], list[Any], dict[int, Any]]:
    """MAPS map outputs written to A's directory, pushed with location=A and finalized:
    (driver, offsets, push reports, merged partitions)."""
    offsets = write_maps(a, APP, shuffle)
    driver = ShuffleDriver(
        APP,
        shuffle,
        MAPS,
        REDUCES,
        mergers,
        credentials=a.creds,
        config=DriverConfig(min_shuffle_size_to_wait=0, finalize_timeout_s=5),
        push=push,
    )
    store = LocalStore(a.directory)
    reports = []
    for m in range(MAPS):
        reports.append(push_map_output(store, driver.target, m, 0, offsets[m], location=a.address))
        driver.map_finished(MapStatus(m, 0, a.address, block_sizes(offsets[m])))
    return driver, offsets, reports, driver.finalize()


def shuffle_from_a(pair: list[ShuffleService], shuffle: int, push: PushConfig) -> dict[str, Any]:
    """Maps written to A's directory, pushed to both services as mergers with location=A, then
    finalized by the driver and every reduce read back (it must give the original blocks,
    all from the merges)."""
    a, b = pair
    driver, offsets, reports, merged = push_maps_of_a(a, shuffle, [a.address, b.address], push)
    target = driver.target
    assert sorted(target.mergers) == sorted([a.address, b.address])
    to_merger: Counter[str] = Counter()  # framed bytes each merger should hold
    reduces_of: Counter[str] = Counter()  # reduce partitions each merger merges
    for r in range(REDUCES):
        reduces_of[target.mergers[target.merger_of(r)]] += 1
        for o in offsets.values():
            to_merger[target.mergers[target.merger_of(r)]] += block_sizes(o)[r]
    written = sum(o[-1] for o in offsets.values())
    assert sum(rep.blocks for rep in reports) == MAPS * REDUCES  # every block merged
    assert sum(rep.bytes for rep in reports) == written
    assert sorted(merged) == list(range(REDUCES))
    stubs = 0  # blocks merged as stubs, each resolved once by each read below
    for r in range(REDUCES):
        statuses = tuple(driver.map_statuses())
        # fetched through the services, then found in A's directory on this host
        for local_dirs in ({}, {a.address: a.directory}):
            inp = ReduceInput(
                APP,
                shuffle,
                driver.merge_id,
                r,
                statuses,
                merged[r],
                a.creds,
                local_dirs=local_dirs,
            )
            stats = IOStatistics()
            blocks, report = read_reduce(inp, stats)
            assert [(b.map_index, bytes(b.payload)) for b in blocks] == [
                (m, payload(m, r)) for m in range(MAPS)
            ]
            assert report.merged_blocks == MAPS and report.original_blocks == 0
            if local_dirs:
                stubs += stats.counter("reduce_ref_blocks")
            else:
                assert stats.counter("reduce_ref_blocks") == 0  # fetched from the holder
    return {
        "written": written,
        "to": to_merger,
        "reduces_of": reduces_of,
        "reports": reports,
        "merged_size": sum(p.size for p in merged.values()),
        "stubs": stubs,
    }


def blocks_at(got: dict[str, Any], svc: ShuffleService) -> int:
    return MAPS * got["reduces_of"][svc.address]


def test_a_peers_map_outputs_merge_by_reference(pair):
    a, b = pair
    introduce(a, b)
    got = shuffle_from_a(pair, 0, PushConfig(background=False))
    ca, cb = counters(a), counters(b)
    assert got["to"][a.address] > 0 and got["to"][b.address] > 0  # both merged some
    for svc, c in ((a, ca), (b, cb)):
        # every merged block was found in A's map output file: no PUSH carried a payload
        assert c["push_ref_bytes"] == got["to"][svc.address]
        assert c.get("requests_push", 0) == 0 and c["requests_push_ref"] == MAPS
        # as a stub naming A (the bytes stay written once), or copied
        each = stub_size(a.address) if svc.stubs else None
        assert c["merged_bytes"] == (blocks_at(got, svc) * each if each else got["to"][svc.address])
    assert ca["push_ref_bytes"] + cb["push_ref_bytes"] == got["written"]
    if a.stubs:
        assert got["merged_size"] == MAPS * REDUCES * stub_size(a.address) < got["written"]
        assert got["stubs"] == MAPS * REDUCES
    else:
        assert got["merged_size"] == got["written"] and got["stubs"] == 0


def test_a_merger_that_does_not_know_the_holder_is_sent_bytes(pair):
    a, b = pair  # not introduced: B cannot read A's directory
    push = PushConfig(background=False, max_block_batch_size=1)  # a request per block
    got = shuffle_from_a(pair, 1, push)
    ca, cb = counters(a), counters(b)
    # B refused the first reference of each push (404), then was sent bytes for all of its
    # blocks, that one included, without being asked to read a reference again
    assert got["reduces_of"][b.address] >= 2
    assert cb.get("push_ref_bytes", 0) == 0
    assert cb["requests_push_ref"] == MAPS
    assert cb["requests_push"] == MAPS * got["reduces_of"][b.address]
    assert cb["merged_bytes"] == got["to"][b.address] > 0
    # A holds the map outputs: its own blocks still went by reference
    assert ca["push_ref_bytes"] == got["to"][a.address] > 0
    at_a = blocks_at(got, a) * stub_size(a.address) if a.stubs else got["to"][a.address]
    assert ca["merged_bytes"] == at_a
    assert ca.get("requests_push", 0) == 0
    assert got["stubs"] == (blocks_at(got, a) if a.stubs else 0)


def test_by_reference_off_sends_bytes_only(pair):
    a, b = pair
    introduce(a, b)
    got = shuffle_from_a(pair, 2, PushConfig(background=False, by_reference=False))
    for svc in (a, b):
        c = counters(svc)
        assert c.get("push_ref_bytes", 0) == 0 and c.get("requests_push_ref", 0) == 0
        assert c["requests_push"] == MAPS
        assert c["merged_bytes"] == got["to"][svc.address] > 0


def refused(call) -> int:
    with pytest.raises(ServiceRefused) as e:
        call()
    return e.value.status


def test_peers_and_references_are_checked(pair):
    a, b = pair
    shuffle = 5
    offsets = write_maps(a, APP, shuffle)[0]  # map 0's offsets
    write_maps(a, OTHER, shuffle)  # another application's map outputs, on the same service
    register_app(OTHER, [a.address], TOKEN)

    def ref(r: int, shift: int = 0) -> tuple[int, int, int]:
        return (r, offsets[r] + shift, offsets[r + 1] - offsets[r])

    with ShuffleClient(a.address, credentials=a.creds) as c:

        def push_ref(refs, source="", map_index=0, app=APP, attempt=0):
            return c.push_ref(app, shuffle, 0, map_index, attempt, source, refs)

        # only the service-wide token introduces peers
        assert refused(lambda: c.introduce({b.address: b.directory})) == 403
        # a service it was not introduced to, or none at all
        assert refused(lambda: push_ref([ref(0)], source=b.address)) == 404
        assert refused(lambda: push_ref([ref(0)], source="127.0.0.1:1")) == 404
        # another application's map output, on this application's connection
        assert refused(lambda: push_ref([ref(0)], app=OTHER)) == 403
        # no such map output, or not that far
        assert refused(lambda: push_ref([ref(0)], map_index=MAPS)) == 404
        assert refused(lambda: push_ref([ref(0)], attempt=1)) == 404
        assert refused(lambda: push_ref([(REDUCES, offsets[-1], 100)])) == 404
        # bytes that are not the block they are said to be: another reduce's, or shifted
        wrong = [(1, *ref(0)[1:]), ref(2, shift=1)]
        assert push_ref(wrong) == [PushCode.CORRUPT, PushCode.CORRUPT]
        assert counters(a).get("merged_bytes", 0) == 0
        assert counters(a)["push_corrupt"] == 2
        # the same blocks at their right places merge (from "" or its own address: its store)
        assert push_ref([ref(0)]) == [PushCode.SUCCESS]
        assert push_ref([ref(2)], source=a.address) == [PushCode.SUCCESS]
        (s0, s2) = c.finalize(APP, shuffle, 0)
        assert (s0.reduce_id, s2.reduce_id) == (0, 2)
        assert list(s0.bitmap) == [0] and list(s2.bitmap) == [0]
        merged = 2 * stub_size(a.address) if a.stubs else ref(0)[2] + ref(2)[2]
        assert counters(a)["merged_bytes"] == merged
        # a stub comes only from the service: pushed as bytes, it is refused
        stub = ref_stub(BlockRef(1, 1, 0, offsets[1], ref(1)[2], a.address, 0))
        assert c.push(APP, shuffle, 0, [(1, 1, stub)]) == [PushCode.CORRUPT]
    # the service-wide token may introduce peers: local directories by absolute path only
    with ShuffleClient(a.address, TOKEN) as c:
        assert refused(lambda: c.introduce({b.address: 7})) == 400
    for elsewhere in ("s3://bucket/shuffle", "relative/dir", "memory://x"):
        with ShuffleClient(a.address, TOKEN) as c:
            assert refused(lambda d=elsewhere: c.introduce({b.address: d})) == 400
    with ShuffleClient(a.address, TOKEN) as c:
        assert c.introduce({b.address: b.directory}) == 1


# --- the embedded engine -------------------------------------------------------------------

ROWS = 1000
LOCAL_MAPS, LOCAL_REDUCES = 4, 4


def table(i: int) -> pa.Table:
    rng = np.random.default_rng(i)
    return pa.table({"key": rng.integers(0, 200, ROWS), "row": np.arange(ROWS) + i * ROWS})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cfg = LocalShuffleConfig(nodes=2, workers=2, driver=DriverConfig(min_shuffle_size_to_wait=0))
    with LocalShuffle(cfg, root=str(tmp_path_factory.mktemp("ref-shuffle"))) as ls:
        yield ls


def test_local_shuffle_merges_every_block_by_reference(cluster):
    sources = [functools.partial(table, i) for i in range(LOCAL_MAPS)]
    run = cluster.run(sources, ["key"], LOCAL_REDUCES, push=True)
    rows: Counter[int] = Counter()
    homes: dict[int, int] = {}
    for r, result in enumerate(run.results):
        rows.update(result.column("row").to_pylist())
        for k in set(result.column("key").to_pylist()):
            assert homes.setdefault(k, r) == r  # every key in one partition
    assert rows == Counter(range(LOCAL_MAPS * ROWS))  # every row exactly once
    assert run.finalize["merged_partitions"] == LOCAL_REDUCES
    merged = run.service_counter("merged_bytes")
    assert merged > 0
    # its services know each other: every block merged was found in a map output file, merged
    # as a stub, and found there again by its reducer (the nodes share this host)
    blocks = run.service_counter("merged_blocks")
    assert run.service_counter("push_ref_bytes") > merged
    assert run.counter("reduce_ref_blocks") == blocks == LOCAL_MAPS * LOCAL_REDUCES
    assert run.service_counter("requests_push") == 0


# --- stubs that lie ------------------------------------------------------------------------


def test_a_stub_is_checked_against_the_block_it_names(tmp_path):
    """What the reader finds for a stub must be the block the stub claims: ids, length and
    checksum; without a way to resolve it, a stub is corrupt data, not a block."""
    store = LocalStore(str(tmp_path))
    offsets = write_map_output(store, APP, 0, 2, 0, [payload(2, r) for r in range(REDUCES)])
    data_path = next(f.path for f in store.walk("") if f.path.endswith(".data"))
    data = store.read_bytes(data_path)
    holder = "127.0.0.1:7337"

    def resolve(ref: BlockRef) -> memoryview:
        assert ref.holder == holder and ref.attempt == 0
        return store.read_view(data_path, ref.offset, ref.length)

    def stub(reduce_id: int, at: int, crc: int | None = None) -> bytes:
        start, end = offsets[at], offsets[at + 1]
        crc = HEADER.unpack_from(data, start)[4] if crc is None else crc
        return ref_stub(BlockRef(2, reduce_id, 0, start, end - start, holder, crc))

    (good,) = unframe(stub(1, 1), "t", resolve)
    assert (good.map_index, good.reduce_id, bytes(good.payload)) == (2, 1, payload(2, 1))
    assert bytes(stub(1, 1)[:4]) == REF_MAGIC
    with pytest.raises(CorruptShuffleData, match="not where its stub says"):
        list(unframe(stub(1, 2), "t", resolve))  # names reduce 2's block as reduce 1's
    with pytest.raises(CorruptShuffleData, match="does not match its stub"):
        list(unframe(stub(1, 1, crc=7), "t", resolve))  # the checksum of something else
    with pytest.raises(CorruptShuffleData, match="cannot be resolved"):
        list(unframe(stub(1, 1), "t"))


@pytest.mark.parametrize("lie", ["offset", "holder"])
def test_a_merged_stub_that_lies_falls_back_to_the_map_outputs(pair, lie):
    """A stub altered at rest (it names another reduce's block, or a service that holds none of
    this shuffle's map outputs, which is never asked) fails the reader's checks: its chunk
    falls back to the maps' original blocks, and the reduce still gets the right ones."""
    a, b = pair
    if not a.stubs:
        pytest.skip("copies carry no stubs")
    introduce(a, b)
    shuffle = 9
    push = PushConfig(background=False)
    driver, offsets, _, merged = push_maps_of_a(a, shuffle, [a.address], push)
    store = LocalStore(a.directory)
    data, _, _ = merged_files(APP, shuffle, driver.merge_id, 0)
    raw = bytearray(store.read_bytes(data))
    # the first stub's offset now points at reduce 1's block of the same map
    m0 = HEADER.unpack_from(raw, 0)[1]
    if lie == "offset":  # the first stub points at reduce 1's block of the same map
        REF_BODY.pack_into(raw, HEADER.size, 0, offsets[m0][1], offsets[m0][2] - offsets[m0][1])
    else:  # B: a live service, but not one holding this shuffle's map outputs
        assert len(b.address) == len(a.address)  # both on loopback, ephemeral ports
        raw = bytearray(bytes(raw).replace(a.address.encode(), b.address.encode(), 1))
    store.write_bytes(data, bytes(raw))
    inp = ReduceInput(
        APP,
        shuffle,
        driver.merge_id,
        0,
        tuple(driver.map_statuses()),
        merged[0],
        a.creds,
        local_dirs={a.address: a.directory},
    )
    blocks, report = read_reduce(inp)
    assert [(x.map_index, bytes(x.payload)) for x in blocks] == [
        (m, payload(m, 0)) for m in range(MAPS)
    ]
    assert report.fallback_chunks == 1 and report.original_blocks == MAPS
    assert counters(b).get("requests_fetch", 0) == 0  # never asked for what it does not hold


def test_a_peers_map_outputs_are_read_only_for_the_tenant_that_registered_them(pair):
    """Application ids are unique per service only: a tenant that registered an id on B (not
    on A) keeps its map outputs on B to itself, even against whoever registers the same id on
    A, B's peer: a reference to B's files needs the application's credential on B."""
    a, b = pair
    introduce(a, b)
    victim = register_app(OTHER, [b.address], TOKEN)  # the victim's application, on B only
    offsets = write_maps(b, OTHER, 3)[0]
    thief = register_app(OTHER, [a.address], TOKEN)  # the same id, taken on A
    refs = [(0, offsets[0], offsets[1] - offsets[0])]
    with ShuffleClient(a.address, credentials=thief) as c:
        assert refused(lambda: c.push_ref(OTHER, 3, 0, 0, 0, b.address, refs)) == 403
    assert counters(a).get("push_ref_bytes", 0) == 0
    # the victim itself (its credentials on both services) is served
    both = victim.with_secret(a.address, thief.secret_for(a.address))
    with ShuffleClient(a.address, credentials=both) as c:
        assert c.push_ref(OTHER, 3, 0, 0, 0, b.address, refs) == [PushCode.SUCCESS]


def test_a_reference_may_lie_past_two_gib_in_its_map_output():
    from dataferry.shuffle.protocol import BadRequest, refs_of

    assert refs_of({"blocks": [[1, 5 * 2**30, 100]]}) == [(1, 5 * 2**30, 100)]
    with pytest.raises(BadRequest):
        refs_of({"blocks": [[2**31, 0, 100]]})  # ids stay u31
