"""How the shuffle service sends a byte range of a file over TLS.

A plain connection sends a file with `os.sendfile` (no copy through Python). TLS encrypts in
user space, and asyncio's fallback for a TLS `sendfile` reads 256 KiB at a time, each read a
hop to a thread of the default executor and back: serving merged partitions and fetched blocks
across hosts spent more CPU on those hops than on the encryption. Here the range is read on
the service's I/O threads in pieces of up to `SEND_PIECE` and each piece written to the TLS
stream at once.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

from ..net import StreamConnection
from ..store import Store

SEND_PIECE = 4 * 2**20  # bytes read and written at once (what a connection holds in memory)


async def send_range(
    conn: StreamConnection, store: Store, io: Executor, path: str, start: int, n: int
) -> None:
    """Send `n` bytes of the file at `start`. The answer's header is already sent, so a file
    shorter than it said cannot be answered with an error: the connection is dropped
    (ConnectionAbortedError), and the reader falls back as for any broken connection."""
    loop = asyncio.get_running_loop()
    end = start + n
    while start < end:
        length = min(SEND_PIECE, end - start)
        piece = await loop.run_in_executor(io, store.read_range, path, start, length)
        if len(piece) != length:
            raise ConnectionAbortedError(f"{path}: {length} bytes at {start} are not there")
        await conn.send(piece)
        start += length
