"""Guarantees of the push-based shuffle that a quiet regression would otherwise slip past.

- A merged chunk is returned only if its blocks are exactly the maps its bitmap names: a
  well-formed block of another map swapped in at rest makes the chunk fall back to originals.
- The writer of a partition re-checks for duplicates when it drains deferred blocks: a retry
  of a map that arrives while that map's first block is being written is merged once.
- Corruption anywhere in a block (every header field and the payload) is detected on the read
  path: a merged chunk falls back, an original block fails loudly; wrong bytes never come out.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from pyroaring import BitMap

from dataferry.errors import CorruptShuffleData
from dataferry.shuffle import (
    MapStatus,
    MergedPartition,
    MergeManager,
    PushCode,
    ReadConfig,
    ReduceInput,
    ShuffleClient,
    ShuffleServiceConfig,
    ShuffleServiceProcess,
    frame,
    read_reduce,
    register_app,
    unframe,
    write_map_output,
)
from dataferry.shuffle.blocks import HEADER
from dataferry.shuffle.files import map_output, merged_files
from dataferry.shuffle.mapoutput import block_sizes
from dataferry.store import LocalStore, WrappingStore

from .pushed import push_and_finalize

TOKEN = "guarantee-token"
APP = "app-g"
MAPS = 6
PAYLOAD = 300
FRAMED = HEADER.size + PAYLOAD  # every block of these tests has this size on disk


def payload(m: int) -> bytes:
    """Distinct bytes per map, so a block of the wrong map or a flipped byte shows."""
    return bytes((m * 37 + i) % 251 for i in range(PAYLOAD))


# merged partitions read whole (one request, the default for small ones), chunk by chunk,
# and from the merger's directory on this host (no request)
READS = {
    "whole": ReadConfig(),
    "by-chunk": ReadConfig(max_merged_read_bytes=0),
    "host-local": ReadConfig(),
}


@pytest.fixture(
    scope="module",
    params=[
        (1, "whole"),
        (10**6, "whole"),
        (1, "by-chunk"),
        (10**6, "by-chunk"),
        (1, "host-local"),
    ],
    ids=[
        "chunk-per-block",
        "one-chunk",
        "chunk-per-block-read-by-chunk",
        "one-chunk-read-by-chunk",
        "chunk-per-block-host-local",
    ],
)
def node(request, tmp_path_factory):
    chunk, read = request.param
    directory = str(tmp_path_factory.mktemp("guarantees") / "node")
    with ShuffleServiceProcess(directory, TOKEN, min_chunk_size=chunk) as svc:
        svc.creds = register_app(APP, [svc.address], TOKEN)
        svc.chunk_per_block = chunk == 1
        svc.read_config = READS[read]
        svc.local_dirs = {svc.address: directory} if read == "host-local" else {}
        yield svc


_shuffles = iter(range(100, 10**6))


def merged_shuffle(node) -> tuple[int, LocalStore, dict[int, list[int]], MergedPartition]:
    """A fresh shuffle of MAPS maps into one reduce partition, every block pushed and merged."""
    shuffle = next(_shuffles)
    store, offsets, merged = push_and_finalize(node, APP, shuffle, MAPS, payload)
    assert merged.size == MAPS * FRAMED
    return shuffle, store, offsets, merged


def reduce_input(node, shuffle: int, offsets, merged: MergedPartition | None) -> ReduceInput:
    maps = tuple(MapStatus(m, 0, node.address, block_sizes(offsets[m])) for m in range(MAPS))
    return ReduceInput(
        APP, shuffle, 0, 0, maps, merged, node.creds, node.read_config, local_dirs=node.local_dirs
    )


def rewrite(store: LocalStore, path: str, at: int, new: bytes) -> None:
    raw = bytearray(store.read_bytes(path))
    raw[at : at + len(new)] = new
    store.write_bytes(path, bytes(raw))


def assert_every_map_once_intact(blocks) -> None:
    assert [b.map_index for b in blocks] == list(range(MAPS))
    assert [bytes(b.payload) for b in blocks] == [payload(m) for m in range(MAPS)]


# --- a merged chunk must hold exactly the maps of its bitmap ---------------------------------


def test_a_well_formed_block_of_another_map_swapped_in_at_rest_falls_back(node):
    shuffle, store, offsets, merged = merged_shuffle(node)
    data, _, _ = merged_files(APP, shuffle, 0, 0)
    # map 2's block replaced by map 99's: same size, valid magic and checksum, right reduce
    impostor = frame(99, 0, payload(99))
    assert len(impostor) == FRAMED
    rewrite(store, data, 2 * FRAMED, impostor)
    blocks, report = read_reduce(reduce_input(node, shuffle, offsets, merged))
    assert_every_map_once_intact(blocks)  # map 2 read from its map output, map 99 never
    assert report.fallback_chunks == 1
    if node.chunk_per_block:
        assert (report.fallback_maps, report.merged_blocks, report.original_blocks) == (1, 5, 1)
    else:
        assert (report.fallback_maps, report.merged_blocks, report.original_blocks) == (6, 0, 6)


def test_a_block_of_another_reduce_swapped_in_at_rest_falls_back(node):
    shuffle, store, offsets, merged = merged_shuffle(node)
    data, _, _ = merged_files(APP, shuffle, 0, 0)
    rewrite(store, data, 4 * FRAMED, frame(4, 7, payload(4)))  # map 4, but of reduce 7
    blocks, report = read_reduce(reduce_input(node, shuffle, offsets, merged))
    assert_every_map_once_intact(blocks)
    assert report.fallback_chunks == 1 and report.fallback_maps >= 1


# --- corruption anywhere in a block is caught on the read path -------------------------------

# byte offsets inside a framed block: each header field (magic, map index, reduce id, payload
# length, CRC-32) and the payload's first, middle and last bytes
POSITIONS = {
    "magic": 0,
    "map-index": 4,
    "map-index-low": 7,
    "reduce-id": 11,
    "length": 15,
    "crc": 19,
    "payload-first": HEADER.size,
    "payload-middle": HEADER.size + PAYLOAD // 2,
    "payload-last": FRAMED - 1,
}


@pytest.mark.parametrize("at", POSITIONS.values(), ids=POSITIONS.keys())
def test_a_flipped_byte_in_a_merged_chunk_falls_back_to_originals(node, at):
    shuffle, store, offsets, merged = merged_shuffle(node)
    data, _, _ = merged_files(APP, shuffle, 0, 0)
    pos = 3 * FRAMED + at  # inside map 3's block
    raw = store.read_bytes(data)
    rewrite(store, data, pos, bytes([raw[pos] ^ 0x55]))
    blocks, report = read_reduce(reduce_input(node, shuffle, offsets, merged))
    assert_every_map_once_intact(blocks)  # the flipped byte never reaches the reducer
    assert report.host_local_bytes == (merged.size if node.local_dirs else 0)
    assert report.fallback_chunks >= 1
    assert report.merged_blocks + report.fallback_maps == MAPS


@pytest.mark.parametrize(
    "at", [POSITIONS["payload-first"], POSITIONS["payload-middle"], POSITIONS["payload-last"]]
)
def test_a_flipped_payload_byte_in_a_map_output_fails_the_read(node, at):
    """An original block has no second copy: corruption fails the read, naming the map,
    rather than handing the reducer wrong bytes."""
    shuffle, store, offsets, _ = merged_shuffle(node)
    path, _ = map_output(APP, shuffle, 3, 0)
    raw = store.read_bytes(path)
    rewrite(store, path, at, bytes([raw[at] ^ 0x55]))
    with pytest.raises(CorruptShuffleData, match="map 3"):
        read_reduce(reduce_input(node, shuffle, offsets, None))  # pull: originals only


# --- the drain of deferred blocks re-checks for duplicates -----------------------------------


class GatedWrites(WrappingStore):
    """The first data-file write waits at a gate, so a test can push while it is in flight."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.entered, self.release = threading.Event(), threading.Event()

    def _write_at(self, path, offset, data):
        if path.endswith(".data") and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(30), "the test never opened the gate"
        super()._write_at(path, offset, data)


def test_a_retry_arriving_while_its_first_block_is_written_is_merged_once(tmp_path):
    store = GatedWrites(LocalStore(str(tmp_path)))
    mm = MergeManager(store, ShuffleServiceConfig(min_chunk_size=10**6))
    first: list[object] = []
    writer = threading.Thread(
        target=lambda: first.append(mm.push(APP, 0, 0, 3, 0, frame(3, 0, payload(3))))
    )
    writer.start()
    try:
        assert store.entered.wait(30)
        # map 3 is being written (not yet in the bitmap): its retry and map 4 wait behind it
        retry = mm.push(APP, 0, 0, 3, 0, frame(3, 0, payload(3)))
        other = mm.push(APP, 0, 0, 4, 0, frame(4, 0, payload(4)))
        assert isinstance(retry, Future) and isinstance(other, Future)
    finally:
        store.release.set()
        writer.join(30)
    assert first == [PushCode.SUCCESS]
    assert retry.result(30) == PushCode.DUPLICATE  # acknowledged, not merged a second time
    assert other.result(30) == PushCode.SUCCESS
    (status,) = mm.finalize(APP, 0, 0)
    assert status.bitmap == BitMap([3, 4]) and status.size == 2 * FRAMED
    data, _, _ = merged_files(APP, 0, 0, 0)
    assert [b.map_index for b in unframe(store.inner.read_bytes(data))] == [3, 4]
    assert mm.stats.counter("merged_blocks") == 2 and mm.deferred_bytes == 0


# --- the checksum is checked once, by the reader ---------------------------------------------


def test_a_payload_corrupted_in_flight_is_caught_by_the_reader(node):
    """The service checks a pushed block's header only (one checksum per block on the way to
    the reduce, the reader's): a payload corrupted in flight is merged, then its chunk falls
    back to the map outputs, and the reduce gets the right bytes."""
    shuffle = next(_shuffles)
    store = LocalStore(node.directory)
    offsets = {m: write_map_output(store, APP, shuffle, m, 0, [payload(m)]) for m in range(MAPS)}
    client = ShuffleClient(node.address, credentials=node.creds)
    for m in range(MAPS):
        block = bytearray(frame(m, 0, payload(m)))
        if m == 2:
            block[HEADER.size + 7] ^= 0x55  # the header (and its checksum) as the map sent it
        assert client.push(APP, shuffle, 0, [(m, 0, bytes(block))]) == [PushCode.SUCCESS]
    (status,) = client.finalize(APP, shuffle, 0)
    merged = MergedPartition(0, node.address, status.bitmap, status.size)
    blocks, report = read_reduce(reduce_input(node, shuffle, offsets, merged))
    assert_every_map_once_intact(blocks)
    assert report.fallback_chunks == 1 and report.fallback_maps >= 1


def test_a_blocks_checksum_is_zlibs_crc32_computed_by_zlib_ng():
    """The frame's checksum is zlib's CRC-32 (the format does not depend on the library), and
    with the shuffle extra installed it is zlib-ng's, ten times faster than zlib's own."""
    import zlib

    from zlib_ng import zlib_ng

    from dataferry.shuffle import blocks

    payload = bytes(range(256)) * 41
    header, body = blocks.frame_pieces(3, 7, memoryview(payload)[5:])
    assert blocks.HEADER.unpack(header)[4] == zlib.crc32(payload[5:])
    assert [b.payload.tobytes() for b in blocks.unframe(header + bytes(body))] == [payload[5:]]
    assert blocks.crc32 is zlib_ng.crc32
