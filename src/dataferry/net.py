"""Network plumbing shared by the services: an asyncio server running on its own thread.

The marker and shuffle services are asyncio servers; a job driver or a test starts them in its
own process, and `dataferry ... serve` runs them as a process of their own. Either way the
event loop lives on one background thread, and `stop()` cancels what is in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .errors import DataferryError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawConnection:
    """A connection read straight into caller buffers (no stream buffer, no extra copies):
    for services that move large payloads, such as the shuffle service."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        self.loop, self.sock = loop, sock

    async def read_exactly(self, n: int, into: bytearray | None = None) -> memoryview | None:
        """n bytes (in `into` when it is given and large enough: a connection that reuses one
        buffer does not allocate and fault in fresh pages for every request), or None if the
        peer closed before sending them."""
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
            while dropped < max_bytes:
                k = await asyncio.wait_for(self.loop.sock_recv_into(self.sock, buf), timeout)
                if not k:
                    break
                dropped += k
        except (OSError, TimeoutError):
            pass

    async def sendfile(self, file: Any, offset: int, count: int) -> None:
        """Zero-copy where the platform has it (os.sendfile), else read and send."""
        await self.loop.sock_sendfile(self.sock, file, offset, count)


RawHandler = Callable[[RawConnection], Awaitable[None]]


class BackgroundServer:
    """Run `handler` for each connection on a loop in a background thread."""

    def __init__(
        self,
        handler: Handler | None,
        name: str,
        limit: int = 2**16,
        raw_handler: RawHandler | None = None,
    ) -> None:
        """`handler` gets asyncio streams; `raw_handler` a RawConnection instead."""
        self.handler, self.raw_handler, self.name, self.limit = handler, raw_handler, name, limit
        self.loop: asyncio.AbstractEventLoop | None = None
        self.address: tuple[str, int] = ("", 0)
        self._server: asyncio.base_events.Server | None = None
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task] = set()  # keep references: the loop holds weak ones
        self._thread: threading.Thread | None = None

    def start(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        on_loop: Callable[[asyncio.AbstractEventLoop], None] | None = None,
    ) -> BackgroundServer:
        """Bind and serve; `on_loop` runs on the loop first (to start background tasks)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self.loop = loop
            try:
                if self.raw_handler is not None:
                    listener = socket.create_server((host, port), backlog=1024)
                    listener.setblocking(False)
                    self._listener = listener
                    self.address = listener.getsockname()[:2]
                    self._tasks.add(loop.create_task(self._accept_forever(listener)))
                else:
                    self._server = loop.run_until_complete(
                        asyncio.start_server(
                            self._connection, host, port, backlog=1024, limit=self.limit
                        )
                    )
                    self.address = self._server.sockets[0].getsockname()[:2]
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
        return self

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            try:
                writer.close()
            except RuntimeError:
                pass  # the loop is shutting down

    async def _accept_forever(self, listener: socket.socket) -> None:
        assert self.loop is not None
        while True:
            sock, _ = await self.loop.sock_accept(listener)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self.loop.create_task(self._raw_connection(sock))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _raw_connection(self, sock: socket.socket) -> None:
        assert self.raw_handler is not None and self.loop is not None
        try:
            await self.raw_handler(RawConnection(self.loop, sock))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            sock.close()

    def stop(self) -> None:
        loop = self.loop
        if loop is None or not loop.is_running():
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
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

    def run_coroutine(self, coro: Awaitable[Any]) -> Any:
        """Run a coroutine on the server's loop from another thread and wait for it."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]


def announce(port_file: str, text: str) -> None:
    """Write a service's address to a file, whole then renamed: a reader never sees half."""
    from .store import LocalStore

    folder, _, name = os.path.abspath(port_file).rpartition(os.sep)
    files = LocalStore(folder)
    files.delete(name)
    files.write_bytes(name + ".tmp", text.encode())
    files.rename(name + ".tmp", name)


def wait_for_signal() -> None:
    """Block until SIGTERM or Ctrl-C (how `dataferry ... serve` runs)."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass


class ServiceProcess:
    """A `dataferry ... serve` command run as its own process; start() waits for its address.

    Tests and job drivers use it to run the marker and shuffle services out of their own process
    (and to kill -9 them)."""

    def __init__(
        self,
        command: Sequence[str],
        token: str = "",
        token_env: str = "",
        what: str = "service",
        **options: Any,
    ) -> None:
        from .store import LocalStore

        self.command, self.token, self.token_env, self.what = list(command), token, token_env, what
        self.options = options
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""
        self._dir = tempfile.mkdtemp(prefix="dataferry-service-")
        self._files = LocalStore(self._dir)
        self._port_file = os.path.join(self._dir, "address")

    def start(self, timeout: float = 30.0) -> ServiceProcess:
        cmd = [sys.executable, "-m", "dataferry.cli", *self.command]
        cmd += ["--port-file", self._port_file]
        for k, v in self.options.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        env = dict(os.environ)
        if self.token_env:
            env[self.token_env] = self.token
        self._files.delete("address")
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._files.exists("address"):
                self.address = self._files.read_bytes("address").decode().strip()
                return self
            if self.proc.poll() is not None:
                tail = self.proc.stderr.read().decode()[-500:]  # type: ignore[union-attr]
                raise DataferryError(f"{self.what} exited: {tail}")
            time.sleep(0.05)
        self.kill()
        raise DataferryError(f"{self.what} did not start within {timeout} s")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(sig)
            self.proc.wait(10)
        self._files.delete("address")

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill(signal.SIGTERM)
