"""An asyncio server running on its own thread, shared by the marker and shuffle services.

The services are asyncio servers; a job driver or a test starts them in its own process, and
`dataferry ... serve` runs them as a process of their own. Either way the event loop lives on
one background thread, and `stop()` cancels what is in flight.

One accept loop serves both services, so both keep serving the same way: running out of file
descriptors pauses accepting (with a back-off, logged once) instead of ending it; a client
address at its connection cap gets in by closing one of its silent or idle connections
(`admission.py`), and is turned away only when every one is serving a request; a TLS handshake must finish within the read
timeout; whatever a connection's handler raises ends that connection only.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable

from ..stats import IOStatistics
from .addresses import advertised_host, join_host_port
from .admission import Admission, Slot, serve_as
from .connection import RawConnection, StreamConnection
from .limits import ConnectionLimits
from .retry import Backoff
from .tls import TLSIdentity, server_context

log = logging.getLogger("dataferry.net")

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
RawHandler = Callable[[RawConnection | StreamConnection], Awaitable[None]]

# accept() failures that mean "out of descriptors or memory for now", not "the listener is gone"
_EXHAUSTED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_TRANSIENT = {errno.ECONNABORTED, errno.EPROTO, errno.EINTR, errno.EAGAIN, errno.EPERM}
_ENDED = (ConnectionError, asyncio.CancelledError, TimeoutError, ssl.SSLError, EOFError)
# out of descriptors: accept again after 0.02 s, doubling up to 1 s, for as long as it lasts (no
# jitter: the one listener has nobody to collide with)
_ACCEPT_BACKOFF = Backoff(0.02, cap_s=1.0, attempts=None, jitter=False)


class BackgroundServer:
    """Run a handler for each connection on a loop in a background thread.

    `handler` gets asyncio streams (for HTTP); `raw_handler` a connection read straight into
    caller buffers (a socket when plain, TLS streams under TLS).
    """

    def __init__(
        self,
        handler: Handler | None,
        name: str,
        limit: int = 2**16,
        raw_handler: RawHandler | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.handler, self.raw_handler, self.name, self.limit = handler, raw_handler, name, limit
        self.limits = limits or ConnectionLimits()
        self.stats = IOStatistics()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.address: tuple[str, int] = ("", 0)
        self.tls: TLSIdentity | None = None
        self._ssl: ssl.SSLContext | None = None
        self._listener: socket.socket | None = None
        self._clients = Admission(self.limits.max_connections_per_client)
        self._tasks: set[asyncio.Task] = set()  # keep references: the loop holds weak ones
        self._thread: threading.Thread | None = None
        self._exhausted = False

    @property
    def fingerprint(self) -> str:
        return self.tls.fingerprint if self.tls is not None else ""

    @property
    def advertised_address(self) -> str:
        """host:port to connect to (for a server bound to 0.0.0.0: this host's address)."""
        host, port = self.address
        return join_host_port(advertised_host(host), port)

    @property
    def tls_note(self) -> str:
        """How it serves, for a log line: TLS and the certificate's fingerprint, or plain."""
        fingerprint = self.fingerprint
        return f"TLS, certificate sha256 {fingerprint}" if fingerprint else "plain, no TLS"

    @property
    def open_connections(self) -> int:
        return self._clients.total()

    def start(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        on_loop: Callable[[asyncio.AbstractEventLoop], None] | None = None,
        tls: TLSIdentity | None = None,
    ) -> BackgroundServer:
        """Bind and serve (under TLS with `tls`); `on_loop` runs on the loop first (to start
        background tasks)."""
        self.tls = tls
        self._ssl = server_context(tls) if tls is not None else None
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            try:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET  # "::", "fd00::5"
                listener = socket.create_server((host, port), family=family, backlog=1024)
                listener.setblocking(False)
                self._listener = listener
                self.address = listener.getsockname()[:2]
                self._tasks.add(loop.create_task(self._accept_forever(listener)))
                if on_loop is not None:
                    on_loop(loop)
            except BaseException as e:
                failure.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        log.debug(
            "%s: bound to %s (%s)",
            self.name,
            join_host_port(*self.address),
            "TLS" if self._ssl is not None else "plain",
        )
        return self

    async def _accept_forever(self, listener: socket.socket) -> None:
        assert self.loop is not None
        paused = 0  # accepts failed in a row for want of descriptors
        while True:
            try:
                sock, peer = await self.loop.sock_accept(listener)
            except OSError as e:
                if e.errno in _EXHAUSTED:
                    delay = _ACCEPT_BACKOFF.wait(paused)
                    paused += 1
                    self._out_of_descriptors(e, delay)
                    await asyncio.sleep(delay)
                    continue
                if e.errno in _TRANSIENT:
                    continue
                return  # the listener was closed: stopping
            paused, self._exhausted = 0, False
            client = str(peer[0]) if isinstance(peer, tuple) else "local"
            if not self._admit(sock, client):
                self.stats.incr("connections_over_cap")
                sock.close()

    def _admit(self, sock: socket.socket, client: str) -> bool:
        """Serve a new connection, closing an older silent or idle one of its address when the
        address is at its cap; False when none can give way."""
        assert self.loop is not None
        task: asyncio.Task | None = None
        started: list[bool] = []

        def close() -> None:  # on the loop: ends a connection to admit a newer one
            self.stats.incr("connections_evicted")
            if task is not None:
                task.cancel()

        slot = self._clients.admit(client, close)
        if slot is None:
            return False
        self.stats.incr("connections_accepted")
        task = self.loop.create_task(self._serve(sock, slot, started))

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            if not started:  # cancelled before it ran: nothing else closes its socket
                sock.close()
                self._clients.release(slot)

        self._tasks.add(task)
        task.add_done_callback(done)
        return True

    def _out_of_descriptors(self, e: OSError, delay: float) -> None:
        self.stats.incr("accept_paused")
        if not self._exhausted:
            self._exhausted = True
            log.warning(
                "%s: cannot accept connections (%s); retrying every %.2f s or more",
                self.name,
                e.strerror,
                delay,
            )

    async def _serve(self, sock: socket.socket, slot: Slot, started: list[bool]) -> None:
        assert self.loop is not None
        started.append(True)
        serve_as(slot)  # what the handler marks (authenticated, idle, busy) is this slot
        client = slot.client
        transport_owns_socket = False
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.raw_handler is not None and self._ssl is None:
                await self.raw_handler(RawConnection(self.loop, sock))
                return
            transport_owns_socket = True  # closed with the transport, after what it holds
            reader, writer = await self._streams(sock)
            try:
                if self.raw_handler is not None:
                    await self.raw_handler(StreamConnection(reader, writer))
                else:
                    assert self.handler is not None
                    await self.handler(reader, writer)
            finally:
                await _close(writer)
        except _ENDED:
            pass
        except Exception as e:  # a handler's bug ends its connection, never the service
            self.stats.incr("connection_errors")
            log.warning("%s: connection from %s failed: %r", self.name, client, e)
        finally:
            if not transport_owns_socket:
                sock.close()
            self._clients.release(slot)

    async def _streams(
        self, sock: socket.socket
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Streams over an accepted socket, after the TLS handshake when there is TLS."""
        assert self.loop is not None
        reader = asyncio.StreamReader(limit=self.limit, loop=self.loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=self.loop)
        timeout = self.limits.read_timeout_s
        extra = {"ssl_handshake_timeout": timeout} if self._ssl is not None else {}
        transport, _ = await asyncio.wait_for(
            self.loop.connect_accepted_socket(lambda: protocol, sock, ssl=self._ssl, **extra),
            timeout + 1,
        )
        return reader, asyncio.StreamWriter(transport, protocol, reader, self.loop)

    def stop(self) -> bool:
        """Stop serving; False if the server was not running (never started, or stopped)."""
        loop = self.loop
        if loop is None or not loop.is_running():
            return False

        async def close() -> None:
            if self._listener is not None:
                self._listener.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)  # let them finish first
            loop.stop()

        asyncio.run_coroutine_threadsafe(close(), loop)
        if self._thread is not None:
            self._thread.join(10)
        log.debug("%s: stopped", self.name)
        return True


async def _close(writer: asyncio.StreamWriter) -> None:
    """Close a stream once what it holds is sent (briefly: a peer that reads nothing more
    cannot keep the connection)."""
    try:
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 1.0)
    except (OSError, TimeoutError, ssl.SSLError, RuntimeError):
        pass  # already gone, too slow, or the loop is shutting down
