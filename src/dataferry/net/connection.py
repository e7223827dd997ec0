"""One accepted connection as the services read it: exact reads into caller buffers (with a
time limit), sends, a zero-copy file send, and a close that lets a refusal reach the peer.

`RawConnection` is a plain socket (no stream buffer, no extra copies: for large payloads);
`StreamConnection` the same over asyncio streams, which is how TLS connections are read.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any


def _peername(getpeername: Any) -> Any:
    try:
        return getpeername()
    except OSError:
        return None


def peer_host(peername: Any) -> str:
    """The host of a socket's peer address ("local" for a Unix socket or a gone peer)."""
    return str(peername[0]) if isinstance(peername, tuple) and peername else "local"


class RawConnection:
    """A plain socket read straight into caller buffers."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self.loop, self.sock = loop, sock
        self.peer = peer_host(_peername(sock.getpeername))  # the client's host, for statistics

    async def read_exactly(
        self, n: int, into: bytearray | None = None, timeout: float | None = None
    ) -> memoryview | None:
        """n bytes (in `into` when it is given and large enough: a connection that reuses one
        buffer does not allocate and fault in fresh pages for every request), or None if the
        peer closed before sending them. TimeoutError past `timeout` seconds."""
        async with asyncio.timeout(timeout):
            buf = into if into is not None and len(into) >= n else bytearray(n)
            view = memoryview(buf)[:n]
            got = 0
            while got < n:
                k = await self.loop.sock_recv_into(self.sock, view[got:])
                if not k:
                    return None
                got += k
            return view

    async def send(self, *parts: bytes | memoryview) -> None:
        for part in parts:
            if part:
                await self.loop.sock_sendall(self.sock, part)

    async def linger_close(self, max_bytes: int = 1 << 20, timeout: float = 1.0) -> None:
        """Close after a refusal without resetting the connection: stop sending, then read and
        drop what the peer still sends (briefly), so the refusal reaches it."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
            buf = bytearray(65536)
            dropped = 0
            async with asyncio.timeout(timeout):
                while dropped < max_bytes:
                    k = await self.loop.sock_recv_into(self.sock, buf)
                    if not k:
                        break
                    dropped += k
        except (OSError, TimeoutError):
            pass

    async def sendfile(self, file: Any, offset: int, count: int) -> None:
        """Zero-copy where the platform has it (os.sendfile), else read and send."""
        await self.loop.sock_sendfile(self.sock, file, offset, count)


class StreamConnection:
    """The same reads and sends over asyncio streams (TLS)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.peer = peer_host(writer.get_extra_info("peername"))  # the client's host

    async def read_exactly(
        self, n: int, into: bytearray | None = None, timeout: float | None = None
    ) -> memoryview | None:
        try:
            async with asyncio.timeout(timeout):
                return memoryview(await self.reader.readexactly(n))
        except asyncio.IncompleteReadError:
            return None

    async def send(self, *parts: bytes | memoryview) -> None:
        for part in parts:
            if part:
                self.writer.write(part)
        await self.writer.drain()

    async def linger_close(self, max_bytes: int = 1 << 20, timeout: float = 1.0) -> None:
        try:
            await self.writer.drain()
            dropped = 0
            async with asyncio.timeout(timeout):
                while dropped < max_bytes:
                    data = await self.reader.read(65536)
                    if not data:
                        break
                    dropped += len(data)
        except (OSError, TimeoutError, ConnectionError):
            pass

    async def sendfile(self, file: Any, offset: int, count: int) -> None:
        """Read and send (TLS encrypts in user space, so there is no zero-copy path)."""
        await self.writer.drain()
        loop = asyncio.get_running_loop()
        await loop.sendfile(self.writer.transport, file, offset, count)
