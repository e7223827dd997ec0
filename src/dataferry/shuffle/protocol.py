"""The shuffle service's wire format: length-prefixed frames over one TCP connection.

    frame  := prefix header payload
    prefix := magic "DS" (2 bytes), message type (u8), header length (u32), payload length (u64)
    header := UTF-8 JSON object
    payload:= raw bytes (framed blocks, bitmaps, index bytes)

A connection starts with HELLO (and no payload): with the service-wide token, the connection
may only REGISTER applications and read STATS; with an application id and the credential
REGISTER gave it, the connection speaks for that application alone (see `tenancy.py`). Before
HELLO, nothing larger than a small header is read or allocated. Requests and answers alternate; an answer is
OK or ERROR (header {"status", "error"}). Large answers (chunks, map-output blocks) are sent with
the platform's zero-copy file sending where it exists.
"""

from __future__ import annotations

import hmac
import json
import math
import struct
from enum import IntEnum
from typing import Any

from .files import check_app

PREFIX = struct.Struct(">2sBIQ")
FRAME_MAGIC = b"DS"  # starts every frame (a framed block starts with blocks.BLOCK_MAGIC)
MAX_HEADER_BYTES = 1024 * 1024


class Msg(IntEnum):
    HELLO = 1  # {"token"} (the service-wide token) or {"app","secret"} (an application's)
    PUSH = 2  # {"app","shuffle","merge_id","blocks":[[map, reduce, length], ...]} + blocks
    FINALIZE = 3  # {"app","shuffle","merge_id"} -> {"statuses":[[reduce,size,bitmap_len]]}+bitmaps
    MERGED_META = 4  # {"app","shuffle","merge_id","reduce"} -> {"index_len"} + index + meta
    MERGED_CHUNK = 5  # {"app","shuffle","merge_id","reduce","chunk"} -> chunk bytes
    FETCH = 6  # {"app","shuffle","map","attempt","start","end"} -> {"offsets"} + blocks
    REMOVE = 7  # {"app","shuffle"} -> {"removed"}
    STATS = 8  # {} -> {"stats": {...}}
    PUSH_DONE = 9  # {"app","shuffle","merge_id","map"} -> {"code"}: a map pushes no more
    PUSHED = 10  # {"app","shuffle","merge_id"} -> bitmap of the maps that said PUSH_DONE
    MERGED_PARTITION = 11  # as MERGED_META -> {"index_len","meta_len"} + index + meta + data
    REGISTER = 12  # {"app"} -> {"secret"}: with the service-wide token; 409 if the app is live
    UNREGISTER = 13  # {"app"} -> {"removed"}: with the app's credential; its files go too
    # {"app","shuffle","merge_id","map","attempt","from","blocks":[[reduce, offset, length]]}
    # -> {"codes"}: merge blocks of a map output on this host, read from its file (no payload)
    PUSH_REF = 14
    PEERS = 15  # {"peers": {address: directory}} -> {"peers"}: with the service-wide token
    RENEW = 16  # {"app"} -> {"lease_s"}: with the app's credential; its lease starts again
    OK = 100
    ERROR = 101


def prefix(msg: Msg, header_len: int, payload_len: int) -> bytes:
    return PREFIX.pack(FRAME_MAGIC, int(msg), header_len, payload_len)


class BadRequest(Exception):
    """A request refused with `status` (the connection goes on)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# --- reading a request's header (every field checked) ------------------------------------------

_MAX_ID = 2**31 - 1  # ids, offsets and lengths all fit (bitmaps hold u32)


def parse_header(raw: memoryview) -> dict[str, Any]:
    """A header: a JSON object of finite numbers (no NaN, Infinity or 1e400)."""
    try:
        header = json.loads(
            bytes(raw) or b"{}", parse_constant=_no_constant, parse_float=_finite_float
        )
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(header, dict):
        raise ValueError("header is not an object")
    return header


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number here")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def same_token(given: Any, token: str) -> bool:
    """Constant-time comparison that any JSON value (non-ASCII, not a string) can go through."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass")
    )


_MAX_OFFSET = 2**63 - 1  # a place in a map output's data file, which may pass 2 GiB


def int_of(header: dict[str, Any], key: str, limit: int = _MAX_ID) -> int:
    """A non-negative integer field (not a float, a bool or a string) up to `limit`."""
    value = header[key]
    if type(value) is not int or not 0 <= value <= limit:
        raise BadRequest(400, f"{key!r} must be a non-negative integer")
    return value


def app_of(header: dict[str, Any]) -> str:
    app = header["app"]
    if not isinstance(app, str):
        raise BadRequest(400, "'app' must be a string")
    return check_app(app)


def ids_of(header: dict[str, Any]) -> tuple[str, int, int]:
    return app_of(header), int_of(header, "shuffle"), int_of(header, "merge_id")


def blocks_of(header: dict[str, Any]) -> list[tuple[int, int, int]]:
    """A push's [[map, reduce, length], ...], each entry checked."""
    return _triples(header, ("map", "reduce", "length"))


def refs_of(header: dict[str, Any]) -> list[tuple[int, int, int]]:
    """A push by reference's [[reduce, offset, length], ...], each entry checked."""
    return _triples(header, ("reduce", "offset", "length"))


def _triples(header: dict[str, Any], names: tuple[str, str, str]) -> list[tuple[int, int, int]]:
    blocks = header["blocks"]
    if not isinstance(blocks, list):
        raise BadRequest(400, "'blocks' must be a list")
    out = []
    for entry in blocks:
        if not isinstance(entry, list) or len(entry) != 3:
            raise BadRequest(400, f"each block must be [{', '.join(names)}]")
        row = dict(zip(names, entry, strict=True))
        a, b, c = (int_of(row, n, _MAX_OFFSET if n == "offset" else _MAX_ID) for n in names)
        out.append((a, b, c))
    return out
