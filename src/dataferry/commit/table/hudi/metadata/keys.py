"""The record keys of Hudi's metadata table (table version 6).

`files`: a partition's key is its path ("." for a table without partitions), the list of
partitions is `__all_partitions__`. `column_stats`: one key per column, partition and file,
the concatenation of three base64 hashes (Hudi's ColumnIndexID, PartitionIndexID,
FileIndexID): XXH64 of the column name, XXH64 of the partition identifier (both 64 bits, seed
0xdabadaba sign-extended, big-endian bytes), and MD5 of the file name. A filter's lookup asks
for keys by the column's prefix, so a key written otherwise is never found.

XXH64 is written out here (the algorithm is public; dataferry takes no dependency for it).
"""

from __future__ import annotations

import base64
import hashlib
import struct

ALL_PARTITIONS = "__all_partitions__"
NON_PARTITIONED = "."
SEED = -625288518 & 0xFFFFFFFFFFFFFFFF  # Hudi's HashID seed, an int widened to a long

_M = 0xFFFFFFFFFFFFFFFF
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def _merge(acc: int, val: int) -> int:
    return ((acc ^ _round(0, val)) * _P1 + _P4) & _M


def xxh64(data: bytes, seed: int = SEED) -> int:
    """XXH64 of `data` (unsigned 64-bit result)."""
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, i)
            v = [_round(a, b) for a, b in zip(v, lanes, strict=True)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for lane in v:
            h = _merge(h, lane)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h = ((_rotl(h ^ _round(0, k), 27) * _P1) + _P4) & _M
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = ((_rotl(h ^ (k * _P1 & _M), 23) * _P2) + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * _P5 & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _id64(text: str) -> str:
    return _b64(struct.pack(">Q", xxh64(text.encode("utf-8"))))


def partition_key(partition: str) -> str:
    """The `files` key of a partition path ("" : the table's root)."""
    return partition.strip("/") or NON_PARTITIONED


def column_prefix(column: str) -> str:
    """The part of a column-stats key a lookup by column asks for."""
    return _id64(column)


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    """The `column_stats` key of a column of a file in a partition."""
    md5 = hashlib.md5(file_name.encode("utf-8"), usedforsecurity=False).digest()
    return column_prefix(column) + _id64(partition_key(partition)) + _b64(md5)
