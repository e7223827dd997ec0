"""Shuffle blocks on disk and on the wire.

Blocks are opaque bytes chosen by the engine. So that a merged file (blocks of many maps
concatenated, as in Spark) can be split again and checked, every block is stored framed:
a 20-byte header (magic, map index, reduce id, payload length, CRC-32 of the payload) and the
payload. A map output, a push and a merged chunk all carry the same framed bytes, so the merge
appends pushed bytes verbatim.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import CorruptShuffleData

HEADER = struct.Struct(">4sIIII")
BLOCK_MAGIC = b"DFB1"  # starts every framed block (a frame starts with protocol.FRAME_MAGIC)


@dataclass(frozen=True)
class Block:
    map_index: int
    reduce_id: int
    payload: memoryview


def frame(map_index: int, reduce_id: int, payload: bytes | memoryview) -> bytes:
    """One framed block (an empty payload frames to nothing: empty blocks do not exist)."""
    if not len(payload):
        return b""
    return (
        HEADER.pack(BLOCK_MAGIC, map_index, reduce_id, len(payload), zlib.crc32(payload)) + payload
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
        if zlib.crc32(payload) != crc:
            raise CorruptShuffleData(f"{where}: checksum mismatch in block of map {map_index}")
        yield Block(map_index, reduce_id, payload)
        pos = start + length
