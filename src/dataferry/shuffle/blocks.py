"""Shuffle blocks on disk and on the wire.

Blocks are opaque bytes chosen by the engine. So that a merged file (blocks of many maps
concatenated, as in Spark) can be split again and checked, every block is stored framed:
a 20-byte header (magic, map index, reduce id, payload length, CRC-32 of the payload) and the
payload. A map output, a push and a merged chunk all carry the same framed bytes, so the merge
appends pushed bytes verbatim.

The checksum is computed once, when the map frames a block, and checked once, by the reader
that hands the block to a reduce (`unframe`). On the way the service checks only the header
(`header_matches`): a payload corrupted in flight is merged, caught by the reader, and its
chunk falls back to the map outputs, so wrong bytes still never reach a reduce.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..errors import CorruptShuffleData

try:  # zlib-ng's CRC-32 is zlib's, about ten times faster (the shuffle extra installs it)
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - the same checksum, only slower
    from zlib import crc32

HEADER = struct.Struct(">4sIIII")
BLOCK_MAGIC = b"DFB1"  # starts every framed block (a frame starts with protocol.FRAME_MAGIC)

# a framed block as its pieces (header, payload), so a payload the map already holds in a
# buffer is written and sent without being copied next to its header
Pieces = tuple[bytes, "bytes | memoryview"]


@dataclass(frozen=True)
class Block:
    map_index: int
    reduce_id: int
    payload: memoryview


def frame_pieces(map_index: int, reduce_id: int, payload: bytes | memoryview) -> Pieces:
    """A framed block as (header, payload), the payload not copied; (b"", b"") when empty."""
    if not len(payload):
        return b"", b""
    crc = crc32(payload)
    return HEADER.pack(BLOCK_MAGIC, map_index, reduce_id, len(payload), crc), payload


def frame(map_index: int, reduce_id: int, payload: bytes | memoryview) -> bytes:
    """One framed block (an empty payload frames to nothing: empty blocks do not exist)."""
    header, body = frame_pieces(map_index, reduce_id, payload)
    return header + bytes(body)


def framed_size(pieces: Sequence[bytes | memoryview]) -> int:
    return sum(len(p) for p in pieces)


def header_matches(block: bytes | memoryview, map_index: int, reduce_id: int) -> bool:
    """Whether `block` is exactly one framed block of the map and reduce it is claimed to be,
    by its header alone (magic, ids, length); the payload's checksum is the reader's check."""
    if len(block) < HEADER.size:
        return False
    magic, m, r, length, _ = HEADER.unpack_from(block, 0)
    return (
        magic == BLOCK_MAGIC
        and (m, r) == (map_index, reduce_id)
        and length == len(block) - HEADER.size
    )


def unframe(data: bytes | memoryview, where: str = "") -> Iterator[Block]:
    """The blocks of a run of framed bytes, each checked; raises CorruptShuffleData naming `where`."""
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if len(view) - pos < HEADER.size:
            raise CorruptShuffleData(f"{where}: truncated block header at byte {pos}")
        magic, map_index, reduce_id, length, crc = HEADER.unpack_from(view, pos)
        if magic != BLOCK_MAGIC:
            raise CorruptShuffleData(f"{where}: bad block magic at byte {pos}")
        start = pos + HEADER.size
        payload = view[start : start + length]
        if len(payload) != length:
            raise CorruptShuffleData(f"{where}: block of map {map_index} truncated at byte {pos}")
        if crc32(payload) != crc:
            raise CorruptShuffleData(f"{where}: checksum mismatch in block of map {map_index}")
        yield Block(map_index, reduce_id, payload)
        pos = start + length
