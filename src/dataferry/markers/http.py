"""The little HTTP/1.1 the marker service speaks: request heads parsed strictly, bodies read
only after the token has been checked, and JSON answers.

Anything malformed raises HttpError with the status to answer; the connection is then closed,
since the stream after a bad request cannot be trusted.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any

_LENGTH = re.compile(r"[0-9]{1,20}")  # digits only: no sign, space or underscore
_METHOD = re.compile(r"[A-Z]{1,16}")

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Head:
    method: str
    target: str
    headers: dict[str, str]

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"

    def has_token(self, token: str) -> bool:
        """Constant-time check of the X-Dataferry-Token header (any bytes may arrive in it)."""
        given = self.headers.get("x-dataferry-token", "")
        return hmac.compare_digest(given.encode("latin-1"), token.encode("utf-8"))

    def content_length(self, limit: int) -> int:
        """The body's length in bytes: required for POST, none for other methods."""
        if "transfer-encoding" in self.headers:
            raise HttpError(501, "Transfer-Encoding is not supported; send Content-Length")
        raw = self.headers.get("content-length")
        if raw is None:
            if self.method == "POST":
                raise HttpError(411, "Content-Length required")
            return 0
        if not _LENGTH.fullmatch(raw):
            raise HttpError(400, "bad Content-Length")
        n = int(raw)
        if n and self.method != "POST":
            raise HttpError(400, f"a {self.method} request has no body")
        if n > limit:
            raise HttpError(413, f"request larger than {limit} bytes")
        return n


def parse_head(raw: bytes) -> Head:
    """A request line and header lines (latin-1, as HTTP/1.1 says), checked."""
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not _METHOD.fullmatch(parts[0]) or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, "malformed request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or name != name.strip():
            raise HttpError(400, "malformed header line")
        headers[name.lower()] = value.strip()
    return Head(parts[0], parts[1], headers)


async def read_head(reader: asyncio.StreamReader, timeout: float) -> Head | None:
    """The next request's head, or None when the peer closed (or went quiet) between requests."""
    try:
        async with asyncio.timeout(timeout):
            raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, TimeoutError):
        return None
    except asyncio.LimitOverrunError:
        raise HttpError(431, "request head too large") from None
    return parse_head(raw)


async def read_body(reader: asyncio.StreamReader, n: int, timeout: float) -> bytes | None:
    """n bytes of body, None if the peer closed first; HttpError 408 if it is too slow."""
    try:
        async with asyncio.timeout(timeout):
            return await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        return None
    except TimeoutError:
        raise HttpError(408, f"body of {n} bytes not received in time") from None


async def respond(
    writer: asyncio.StreamWriter, status: int, body: dict[str, Any], close: bool = False
) -> None:
    raw = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n"
        + ("Connection: close\r\n" if close else "")
        + "\r\n"
    )
    writer.write(head.encode() + raw)
    await writer.drain()
