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

A merger on the host of a map output may merge a block by reference: it stores a stub frame
(magic `DFR1`, the same ids, the block's checksum) whose body names where the framed block
lies (the service holding the map output, the attempt, the offset and length in its data
file). The reader resolves a stub (`unframe`'s `resolve`) and checks what it gets as it checks
a merged block: frame, ids, length and checksum, so a stub that lies is caught the same way.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import CorruptShuffleData

try:  # zlib-ng's CRC-32 is zlib's, about ten times faster (the shuffle extra installs it)
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - the same checksum, only slower
    from zlib import crc32

HEADER = struct.Struct(">4sIIII")
BLOCK_MAGIC = b"DFB1"  # starts every framed block (a frame starts with protocol.FRAME_MAGIC)
REF_MAGIC = b"DFR1"  # starts a stub: a merged block by reference
REF_BODY = struct.Struct(">IQI")  # attempt, offset and framed length, then the holder's address

# a framed block as its pieces (header, payload), so a payload the map already holds in a
# buffer is written and sent without being copied next to its header
Pieces = tuple[bytes, "bytes | memoryview"]


@dataclass(frozen=True)
class Block:
    map_index: int
    reduce_id: int
    payload: memoryview


@dataclass(frozen=True)
class BlockRef:
    """Where a block merged by reference lies: in the data file of map output (map_index,
    attempt) on the service `holder`, `length` framed bytes at `offset`, its payload's CRC."""

    map_index: int
    reduce_id: int
    attempt: int
    offset: int
    length: int
    holder: str
    crc: int


def ref_stub(ref: BlockRef) -> bytes:
    """The stub frame of a block merged by reference."""
    body = REF_BODY.pack(ref.attempt, ref.offset, ref.length) + ref.holder.encode()
    return HEADER.pack(REF_MAGIC, ref.map_index, ref.reduce_id, len(body), ref.crc) + body


def block_crc(block: bytes | memoryview) -> int:
    """The payload checksum a framed block's header carries."""
    return HEADER.unpack_from(block, 0)[4]


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
    by its header alone (magic, ids, length); the payload's checksum is the reader's check.
    A stub is not a block: only the service that merges by reference writes stubs."""
    if len(block) < HEADER.size:
        return False
    magic, m, r, length, _ = HEADER.unpack_from(block, 0)
    return (
        magic == BLOCK_MAGIC
        and (m, r) == (map_index, reduce_id)
        and length == len(block) - HEADER.size
    )


Resolver = Callable[[BlockRef], "bytes | memoryview"]  # a stub's framed block, found


def unframe(
    data: bytes | memoryview, where: str = "", resolve: Resolver | None = None
) -> Iterator[Block]:
    """The blocks of a run of framed bytes, each checked; a stub is replaced by the block
    `resolve` finds for it (checked against the stub). Raises CorruptShuffleData naming
    `where` (and what `resolve` raises)."""
    view = memoryview(data)
    pos = 0
    while pos < len(view):
        if len(view) - pos < HEADER.size:
            raise CorruptShuffleData(f"{where}: truncated block header at byte {pos}")
        magic, map_index, reduce_id, length, crc = HEADER.unpack_from(view, pos)
        if magic not in (BLOCK_MAGIC, REF_MAGIC):
            raise CorruptShuffleData(f"{where}: bad block magic at byte {pos}")
        start = pos + HEADER.size
        payload = view[start : start + length]
        if len(payload) != length:
            raise CorruptShuffleData(f"{where}: block of map {map_index} truncated at byte {pos}")
        if magic == REF_MAGIC:
            payload = _resolved(payload, map_index, reduce_id, crc, where, resolve)
        if crc32(payload) != crc:
            raise CorruptShuffleData(f"{where}: checksum mismatch in block of map {map_index}")
        yield Block(map_index, reduce_id, payload)
        pos = start + length


def stub_refs(data: bytes | memoryview) -> list[BlockRef]:
    """The blocks the stubs of a run of framed bytes name, in order, by their headers alone
    (so a reader can fetch them together before `unframe` checks each); the scan stops at
    the first frame that does not parse, which `unframe` then reports."""
    view = memoryview(data)
    refs: list[BlockRef] = []
    pos = 0
    while len(view) - pos >= HEADER.size:
        magic, map_index, reduce_id, length, crc = HEADER.unpack_from(view, pos)
        body = view[pos + HEADER.size : pos + HEADER.size + length]
        if magic not in (BLOCK_MAGIC, REF_MAGIC) or len(body) != length:
            break
        if magic == REF_MAGIC and length >= REF_BODY.size:
            attempt, offset, framed = REF_BODY.unpack_from(body, 0)
            try:
                holder = bytes(body[REF_BODY.size :]).decode()
            except UnicodeDecodeError:
                break
            refs.append(BlockRef(map_index, reduce_id, attempt, offset, framed, holder, crc))
        pos += HEADER.size + length
    return refs


def _resolved(
    body: memoryview, map_index: int, reduce_id: int, crc: int, where: str, resolve: Resolver | None
) -> memoryview:
    """The payload of the block a stub names, its frame checked against the stub."""
    if resolve is None or len(body) < REF_BODY.size:
        raise CorruptShuffleData(f"{where}: a stub of map {map_index} that cannot be resolved")
    attempt, offset, length = REF_BODY.unpack_from(body, 0)
    try:
        holder = bytes(body[REF_BODY.size :]).decode()
    except UnicodeDecodeError:
        raise CorruptShuffleData(f"{where}: a stub of map {map_index} names no service") from None
    block = memoryview(
        resolve(BlockRef(map_index, reduce_id, attempt, offset, length, holder, crc))
    )
    if len(block) != length or not header_matches(block, map_index, reduce_id):
        raise CorruptShuffleData(f"{where}: map {map_index}'s block is not where its stub says")
    if block_crc(block) != crc:
        raise CorruptShuffleData(f"{where}: map {map_index}'s block does not match its stub")
    return block[HEADER.size :]
