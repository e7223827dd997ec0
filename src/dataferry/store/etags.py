"""Entity tags as S3 computes them, shared by the stores that give them and the committers that
check them.

A simple PUT (and each uploaded part) gets the md5 of its bytes in hex. A completed multipart
upload gets the md5 of the concatenated binary md5s of its parts, then `-<number of parts>`.
Etags travel without the quotes S3 wraps them in (as `S3Store` returns them).
"""

from __future__ import annotations

import hashlib


def part_etag(data: bytes) -> str:
    """The etag S3 gives an uploaded part (or a simple PUT): md5 hex of its bytes."""
    return hashlib.md5(data).hexdigest()


def multipart_etag(etags: list[str]) -> str:
    """The etag S3 gives a completed multipart object: md5 of the parts' md5s, `-<parts>`."""
    digest = hashlib.md5(b"".join(bytes.fromhex(e.strip('"')) for e in etags)).hexdigest()
    return f"{digest}-{len(etags)}"
