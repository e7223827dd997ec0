"""Multipart uploads as Azure block blobs: a file is staged as blocks under its final name (Put
Block: uncommitted blocks are invisible) and made visible by committing their list (Put Block
List). Azure has no upload object: the "upload id" is a fresh id of the writer's own, and every
block id of an upload starts with it, so a block list names only its own upload's blocks and a
second attempt's blocks never mix in.

A block id is `<upload id: 32 hex><part number: 7 digits><flag>` (40 characters before base64:
Azure wants every block id of a blob the same length). The flag `d` is a staged block, `e` an
empty part (never staged: a zero-byte Put Block is not accepted everywhere), `x` the tombstone an
abort stages. Committing any block list discards every uncommitted block of the blob; an
abort cannot remove one upload's blocks alone, so it stages a tombstone and removes the blob's
uncommitted blocks only once every upload staged there is tombstoned (one left live, a
speculative twin's or another job's, keeps them all until it commits or aborts; Azure drops
uncommitted blocks after a week in any case).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

UPLOAD_ID_LEN = 32
STAGED, EMPTY, TOMBSTONE = "d", "e", "x"


def new_upload_id() -> str:
    return uuid.uuid4().hex


def block_id(upload_id: str, number: int, flag: str = STAGED) -> str:
    """The base64 block id of part `number` of an upload."""
    if len(upload_id) != UPLOAD_ID_LEN or not 0 <= number < 10_000_000:
        raise ValueError(f"not an upload id and part number: {upload_id!r}, {number}")
    return base64.b64encode(f"{upload_id}{number:07d}{flag}".encode()).decode()


@dataclass(frozen=True)
class Block:
    upload_id: str
    number: int
    flag: str


def parse(block: str) -> Block | None:
    """A block id of ours, or None for another writer's."""
    try:
        raw = base64.b64decode(block, validate=True).decode()
    except ValueError:
        return None
    if len(raw) != UPLOAD_ID_LEN + 8 or raw[-1] not in (STAGED, EMPTY, TOMBSTONE):
        return None
    upload, number = raw[:UPLOAD_ID_LEN], raw[UPLOAD_ID_LEN:-1]
    if not number.isdigit():
        return None
    return Block(upload, int(number), raw[-1])


def uploads_of(blocks: list[str]) -> tuple[set[str], set[str], bool]:
    """(uploads staged, uploads tombstoned, any block not ours) among uncommitted block ids."""
    staged: set[str] = set()
    dead: set[str] = set()
    foreign = False
    for b in blocks:
        p = parse(b)
        if p is None:
            foreign = True
        elif p.flag == TOMBSTONE:
            dead.add(p.upload_id)
        else:
            staged.add(p.upload_id)
    return staged, dead, foreign
