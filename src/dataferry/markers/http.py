"""The HTTP/1.1 the marker service speaks, on h11: request heads parsed strictly, bodies read
only after the token has been checked, and JSON answers.

h11 keeps each connection's protocol state (framing, keep-alive, what may be sent when); this
module feeds it from the asyncio stream: a request's head first, read whole and no larger than
the stream's limit, then its body only when the service asks for it, so nothing past the head
is read before the token is checked.

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

import h11

_METHOD = re.compile(r"[A-Z]{1,16}")
# a Host header line (h11 allows no space before the colon, and no value holds a line break)
_HOST_LINE = re.compile(rb"\r\nhost:", re.IGNORECASE)

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
    """A request's line and headers as h11 checked them (names lower case; a repeated header's
    values joined by commas)."""

    method: str
    target: str
    headers: dict[str, bytes]

    def has_token(self, token: str) -> bool:
        """Constant-time check of the X-Dataferry-Token header (any bytes may arrive in it)."""
        given = self.headers.get("x-dataferry-token", b"")
        return hmac.compare_digest(given, token.encode("utf-8"))

    def content_length(self, limit: int) -> int:
        """The body's length in bytes: required for POST, none for other methods."""
        if "transfer-encoding" in self.headers:
            raise HttpError(501, "Transfer-Encoding is not supported; send Content-Length")
        raw = self.headers.get("content-length")
        if raw is None:
            if self.method == "POST":
                raise HttpError(411, "Content-Length required")
            return 0
        n = int(raw)  # h11 let through digits only, and one value
        if n and self.method != "POST":
            raise HttpError(400, f"a {self.method} request has no body")
        if n > limit:
            raise HttpError(413, f"request larger than {limit} bytes")
        return n


def _head_of(request: h11.Request) -> Head:
    method = request.method.decode("ascii")
    if not _METHOD.fullmatch(method) or request.http_version not in (b"1.0", b"1.1"):
        raise HttpError(400, "malformed request line")
    headers: dict[str, bytes] = {}
    for name, value in request.headers:
        key = name.decode("ascii")
        headers[key] = headers[key] + b", " + value if key in headers else value
    return Head(method, request.target.decode("latin-1"), headers)


class HttpConnection:
    """One client connection of the service: requests in turn (kept alive while both sides
    want it), each read as head, then body, then answered. `max_head` is the stream's limit."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_head: int
    ) -> None:
        self.reader, self.writer, self.max_head = reader, writer, max_head
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=max_head)

    async def read_head(self, timeout: float) -> Head | None:
        """The next request's head, or None when the peer closed (or went quiet) between
        requests; HttpError 431 past the stream's limit, 400 (or 501) when h11 refuses it."""
        # a request h11 already holds came with the last one (bare-LF heads only: a head is
        # otherwise read to its end, and no further)
        event = self._next(b"") if self._h11.trailing_data[0] else h11.NEED_DATA
        if event is h11.NEED_DATA:
            raw = await self._head_bytes(timeout)
            if raw is None:
                return None
            event = self._next(raw)
        if not isinstance(event, h11.Request):
            raise HttpError(400, "malformed request")
        return _head_of(event)

    async def _head_bytes(self, timeout: float) -> bytes | None:
        try:
            async with asyncio.timeout(timeout):
                raw = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, TimeoutError):
            return None
        except asyncio.LimitOverrunError:
            # shown what overran the limit, h11 refuses it (431), and can then answer it
            self._next(await self.reader.read(self.max_head + 1))
            raise HttpError(431, "request head too large") from None
        if not _HOST_LINE.search(raw):
            # h11 holds HTTP/1.1 to its Host header; this service has one name and needs none
            raw = raw[:-2] + b"Host: \r\n\r\n"
        return raw

    async def read_body(self, n: int, timeout: float) -> bytes | None:
        """The request's body of n bytes (also for n = 0: the request is then complete), None
        if the peer closed first; HttpError 408 if it is too slow."""
        raw = b""
        if n:
            if self._h11.they_are_waiting_for_100_continue:
                self.writer.write(self._send(h11.InformationalResponse(status_code=100)))
            try:
                async with asyncio.timeout(timeout):
                    raw = await self.reader.readexactly(n)
            except asyncio.IncompleteReadError:
                return None
            except TimeoutError:
                raise HttpError(408, f"body of {n} bytes not received in time") from None
        parts = []
        event = self._next(raw)
        while isinstance(event, h11.Data):
            parts.append(event.data)
            event = self._next(b"")
        if not isinstance(event, h11.EndOfMessage):
            raise HttpError(400, "malformed request body")
        return b"".join(parts)

    async def respond(self, status: int, body: dict[str, Any], close: bool = False) -> bool:
        """Send a JSON answer (and say the connection closes, with `close`); True when the
        connection can carry the next request."""
        raw = json.dumps(body).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(raw)))]
        if close:
            headers.append(("Connection", "close"))
        reason = REASONS.get(status, "Error")
        self.writer.write(
            self._send(h11.Response(status_code=status, headers=headers, reason=reason))
            + self._send(h11.Data(data=raw))
            + self._send(h11.EndOfMessage())
        )
        await self.writer.drain()
        conn = self._h11
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
            return True
        return False

    def _next(self, data: bytes) -> Any:
        """h11's next event, after giving it `data`."""
        try:
            if data:
                self._h11.receive_data(data)
            return self._h11.next_event()
        except h11.RemoteProtocolError as e:
            raise HttpError(e.error_status_hint, str(e)) from None

    def _send(self, event: Any) -> bytes:
        return self._h11.send(event) or b""
