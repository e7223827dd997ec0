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

import struct
from enum import IntEnum

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
    OK = 100
    ERROR = 101


def prefix(msg: Msg, header_len: int, payload_len: int) -> bytes:
    return PREFIX.pack(FRAME_MAGIC, int(msg), header_len, payload_len)
