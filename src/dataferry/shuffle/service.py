"""The shuffle service: one per node, serving map outputs and merging pushed blocks.

It serves original map-output blocks (by shuffle, map attempt and reduce range) and merged
chunks with zero-copy file sending, accepts pushes into the merge state machine (`merge.py`),
finalizes merges, serves merged metadata, and removes a shuffle's files when told.

A connection must authenticate first (HELLO, nothing else read before it): with the
service-wide token it may only register applications and read statistics; with an application
id and that application's credential it speaks for that application alone, and every request
on an application's data must come on such a connection and name that application (403
otherwise). See `tenancy.py` for registration, replays and per-application quotas. Every
malformed, oversized or late request gets an ERROR answer and, where the stream can no longer be
trusted, a clean close; the service keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import ConfigError, CorruptShuffleData, NotFound, StoreError
from ..net import (
    BackgroundServer,
    RawConnection,
    StreamConnection,
    TLSChoice,
    resolve_tls,
    this_connection,
)
from ..stats import IOStatistics
from ..store import Store
from .config import ShuffleServiceConfig
from .intake import PushIntake
from .merge import MergeManager
from .protocol import (
    FRAME_MAGIC,
    MAX_HEADER_BYTES,
    PREFIX,
    BadRequest,
    Msg,
    app_of,
    ids_of,
    int_of,
    parse_header,
    prefix,
    same_token,
)
from .ranges import ServedRanges
from .send_range import send_range
from .tenancy import Registry

log = logging.getLogger("dataferry.shuffle")
Connection = RawConnection | StreamConnection
Header = dict[str, Any]  # a request's header, parsed (protocol.parse_header)
# a message type's handler: (header, payload, connection) -> the answer sent on the connection
RequestHandler = Callable[[Header, memoryview, Connection], Awaitable[None]]
T = TypeVar("T")

# requests on an application's data: each needs a connection that speaks for that application
DATA_REQUESTS = frozenset(
    {
        Msg.PUSH,
        Msg.PUSH_REF,
        Msg.FINALIZE,
        Msg.MERGED_META,
        Msg.MERGED_CHUNK,
        Msg.MERGED_PARTITION,
        Msg.FETCH,
        Msg.REMOVE,
        Msg.PUSH_DONE,
        Msg.PUSHED,
        Msg.UNREGISTER,
        Msg.RENEW,
    }
)


class _Session:
    """Who a connection speaks for: nobody yet (""), the service ("service": the
    service-wide token; "open": a service without one), or one application ("app")."""

    __slots__ = ("app", "role")

    def __init__(self, role: str) -> None:
        self.role, self.app = role, ""


class ShuffleService:
    """The service over a node's shuffle directory (a store); start() / stop()."""

    def __init__(
        self, store: Store, config: ShuffleServiceConfig | None = None, io_threads: int = 8
    ):
        self.store = store
        self.config = config or ShuffleServiceConfig()
        self.merges = MergeManager(store, self.config)
        self.stats = IOStatistics()
        self.registry = Registry(
            store,
            self.config.max_apps,
            self.config.app_max_connections,
            self.config.app_lease_s,
            self.stats,
        )
        self._io = ThreadPoolExecutor(io_threads, thread_name_prefix="shuffle-io")
        self.intake = PushIntake(
            store, self.merges, self.config, self.stats, self._io, lambda: self.address
        )
        self.ranges = ServedRanges(store, self.merges)
        self._sweeper: asyncio.Task | None = None
        self._handlers = self._handler_table()
        # raw sockets (when plain): a pushed payload is received straight into one buffer, with
        # no stream buffer copying it on the way
        self._server = BackgroundServer(
            None, "shuffle-loop", raw_handler=self._connection, limits=self.config.limits
        )

    def start(
        self, host: str = "127.0.0.1", port: int = 0, tls: TLSChoice = "auto"
    ) -> ShuffleService:
        """Bind and serve; `tls` is an identity, None (plain), or "auto": TLS with a fresh
        self-signed identity beyond loopback, plain on loopback."""

        def begin(loop: asyncio.AbstractEventLoop) -> None:
            sweep = self.registry.sweep_forever(self._io, self._remove_files)
            self._sweeper = loop.create_task(sweep)

        self._server.start(host, port, on_loop=begin, tls=resolve_tls(host, tls))
        log.info("shuffle service listening on %s (%s)", self.address, self._server.tls_note)
        return self

    @property
    def address(self) -> str:
        """host:port to connect to (for a service bound to 0.0.0.0: this host's address)."""
        return self._server.advertised_address

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the service's certificate ("" when plain): what clients pin."""
        return self._server.fingerprint

    def stop(self) -> None:
        stopped = self._server.stop()
        self._io.shutdown(wait=True, cancel_futures=True)  # queued work: nobody to answer
        if stopped:
            log.info("shuffle service on %s stopped", self.address)

    def __enter__(self) -> ShuffleService:
        return self.start() if self._server.loop is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def snapshot(self) -> dict[str, Any]:
        stats = IOStatistics(self.stats.snapshot())
        stats.merge(self.merges.stats.snapshot())
        stats.merge(self.store.stats.snapshot())
        stats.merge(self._server.stats.snapshot())
        return stats.snapshot()

    # --- connection ------------------------------------------------------------------------

    async def _connection(self, conn: Connection) -> None:
        session = _Session("" if self.config.token else "open")
        try:
            await self._session(conn, session)
        finally:
            if session.app:
                self.registry.disconnect(session.app)

    async def _session(self, conn: Connection, session: _Session) -> None:
        limits = self.config.limits
        buffer = bytearray(0)  # reused for every payload of this connection
        slot = this_connection()  # silent or idle, it may be closed to admit another (net)
        while True:
            authed = bool(session.role)
            slot.idle()
            try:  # before HELLO, the peer has the read timeout to authenticate; then idle ones
                wait = limits.idle_timeout_s if authed else limits.read_timeout_s
                raw = await conn.read_exactly(PREFIX.size, timeout=wait)
            except TimeoutError:
                self.stats.incr("connections_timed_out")
                return
            if raw is None:
                return
            slot.busy()
            magic, msg, header_len, payload_len = PREFIX.unpack(raw)
            if magic != FRAME_MAGIC:
                return await self._refuse(conn, 400, "malformed frame")
            if not authed and (
                msg != Msg.HELLO or payload_len or header_len > limits.max_unauthenticated_bytes
            ):
                self.stats.incr("requests_unauthorized")
                return await self._refuse(conn, 401, "the connection must begin with HELLO")
            if header_len > MAX_HEADER_BYTES or payload_len > self.config.max_frame_bytes:
                return await self._refuse(
                    conn,
                    413,
                    f"header of {header_len} / payload of {payload_len} bytes over "
                    f"{MAX_HEADER_BYTES} / {self.config.max_frame_bytes}",
                )
            try:
                head = await conn.read_exactly(header_len, timeout=limits.read_timeout_s)
                if payload_len > len(buffer):  # only once authenticated
                    buffer = bytearray(payload_len)
                payload = await conn.read_exactly(payload_len, buffer, limits.read_timeout_s)
            except TimeoutError:
                self.stats.incr("connections_timed_out")
                return await self._refuse(conn, 408, "request not received in time")
            if head is None or payload is None:
                return
            if session.role == "open":  # a service without a token: a whole frame suffices
                slot.authenticated()
            try:
                header = parse_header(head)
            except ValueError as e:
                if not authed:
                    return await self._refuse(conn, 400, f"malformed header: {e}")
                self.stats.incr("requests_refused")  # the frame was whole: the stream goes on
                await self._answer_error(conn, 400, f"malformed header: {e}")
                continue
            if msg == Msg.HELLO and not session.app:
                refused = self._hello(session, header)
                if refused is not None:
                    self.stats.incr("requests_unauthorized")
                    return await self._refuse(conn, *refused)
                slot.authenticated()
                await self._answer(conn, {})
                continue
            if not await self._serve_request(conn, msg, header, payload, session):
                return

    def _hello(self, session: _Session, header: dict[str, Any]) -> tuple[int, str] | None:
        """Authenticate a connection: None, or the refusal (status, words)."""
        if "app" in header:  # an application's connection
            app = header.get("app")
            if not self.registry.check(app, header.get("secret")):
                return 401, "unknown application or wrong credential"
            assert isinstance(app, str)
            if not self.registry.connect(app):
                self.stats.incr("connections_over_app_cap")
                return 429, f"application {app} has {self.config.app_max_connections} connections"
            session.role, session.app = "app", app
            self.registry.touch(app)
            return None
        if session.role == "open" or same_token(header.get("token"), self.config.token):
            session.role = session.role or "service"
            return None
        return 401, "missing or wrong token"

    def _authorize(self, msg: Msg, header: dict[str, Any], session: _Session) -> None:
        """Refuse (403) a request the connection may not make."""
        if msg in (Msg.REGISTER, Msg.PEERS) and session.app:
            raise BadRequest(403, f"{msg.name} needs the service-wide token")
        if msg not in DATA_REQUESTS:
            return
        app = app_of(header)
        if session.app:
            if app != session.app or not self.registry.live(app):
                self.stats.incr("requests_forbidden")
                raise BadRequest(403, f"this connection does not speak for application {app}")
            self.registry.touch(app)  # the application's use renews its lease
        elif session.role == "service" or self.registry.live(app):
            self.stats.incr("requests_forbidden")
            raise BadRequest(
                403, f"requests on application {app}'s data need its credential, not the token"
            )

    async def _serve_request(
        self,
        conn: Connection,
        msg: int,
        header: dict[str, Any],
        payload: memoryview,
        session: _Session,
    ) -> bool:
        """Answer one authenticated request; False when the connection must close."""
        try:
            if msg not in Msg.__members__.values():
                known = ", ".join(Msg(m).name for m in sorted(self._handlers))
                raise BadRequest(400, f"unknown message type {msg}: this service answers {known}")
            self._authorize(Msg(msg), header, session)
            await self._dispatch(Msg(msg), header, payload, conn)
        except BadRequest as e:
            self.stats.incr("requests_refused")
            await self._answer_error(conn, e.status, str(e))
        except (KeyError, TypeError, ValueError, ConfigError, CorruptShuffleData) as e:
            self.stats.incr("requests_refused")
            await self._answer_error(conn, 400, f"bad request: {e}")
        except NotFound as e:
            await self._answer_error(conn, 404, str(e))
        except StoreError as e:
            await self._answer_error(conn, 500, str(e))
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as e:  # a bug must still answer, and must not end the service
            log.warning("shuffle service: request %s failed: %r", msg, e)
            self.stats.incr("requests_failed")
            await self._refuse(conn, 500, f"internal error: {type(e).__name__}")
            return False
        return True

    def _handler_table(self) -> dict[int, RequestHandler]:
        """What answers each message type (as Dask's shuffle registers its handlers): a new
        message joins with one row here and one method below."""
        return {
            Msg.HELLO: self._on_hello,
            Msg.PUSH: self._on_push,
            Msg.PUSH_REF: self._on_push_ref,
            Msg.PEERS: self._on_peers,
            Msg.FINALIZE: self._on_finalize,
            Msg.MERGED_META: self._on_merged_meta,
            Msg.MERGED_PARTITION: self._on_merged_partition,
            Msg.MERGED_CHUNK: self._on_merged_chunk,
            Msg.FETCH: self._on_fetch,
            Msg.REMOVE: self._on_remove,
            Msg.REGISTER: self._on_register,
            Msg.UNREGISTER: self._on_unregister,
            Msg.RENEW: self._on_renew,
            Msg.STATS: self._on_stats,
            Msg.PUSH_DONE: self._on_push_done,
            Msg.PUSHED: self._on_pushed,
        }

    async def _dispatch(
        self, msg: Msg, header: dict[str, Any], payload: memoryview, conn: Connection
    ) -> None:
        handler = self._handlers.get(msg)
        if handler is None:  # a known kind no client sends (OK, ERROR)
            raise BadRequest(400, f"unknown message type {int(msg)} ({msg.name})")
        self.stats.incr(f"requests_{msg.name.lower()}")
        self.stats.incr(f"{msg.name.lower()}_from.{conn.peer}")  # per client host
        await handler(header, payload, conn)

    # --- the handlers, one per message type ------------------------------------------------

    async def _on_hello(self, header: Header, payload: memoryview, conn: Connection) -> None:
        await self._answer(conn, {})

    async def _on_push(self, header: Header, payload: memoryview, conn: Connection) -> None:
        codes = await self.intake.push(header, payload)
        await self._answer(conn, {"codes": codes})

    async def _on_push_ref(self, header: Header, payload: memoryview, conn: Connection) -> None:
        codes = await self.intake.push_ref(header)
        await self._answer(conn, {"codes": codes})

    async def _on_peers(self, header: Header, payload: memoryview, conn: Connection) -> None:
        peers = header["peers"]
        if not isinstance(peers, dict) or not all(
            isinstance(v, str) for kv in peers.items() for v in kv
        ):
            raise BadRequest(400, "'peers' must map service addresses to directories")
        known = await self._on_io(self.introduce, peers)
        await self._answer(conn, {"peers": known})

    async def _on_finalize(self, header: Header, payload: memoryview, conn: Connection) -> None:
        app, shuffle, merge_id = ids_of(header)
        statuses = await self._on_io(self.merges.finalize, app, shuffle, merge_id)
        bitmaps = [s.bitmap.serialize() for s in statuses]
        rows = [[s.reduce_id, s.size, len(b)] for s, b in zip(statuses, bitmaps, strict=True)]
        await self._answer(conn, {"statuses": rows}, b"".join(bitmaps))

    async def _on_merged_meta(self, header: Header, payload: memoryview, conn: Connection) -> None:
        index, meta = await self._on_io(self.ranges.merged_meta, header)
        await self._answer(conn, {"index_len": len(index)}, index + meta)

    async def _on_merged_partition(
        self, header: Header, payload: memoryview, conn: Connection
    ) -> None:
        path, length, index, meta = await self._on_io(self.ranges.merged_partition, header)
        lengths = {"index_len": len(index), "meta_len": len(meta)}
        await self._send_file(conn, lengths, path, 0, length, index + meta)

    async def _on_merged_chunk(self, header: Header, payload: memoryview, conn: Connection) -> None:
        path, start, length = await self._on_io(self.ranges.chunk_range, header)
        await self._send_file(conn, {}, path, start, length)

    async def _on_fetch(self, header: Header, payload: memoryview, conn: Connection) -> None:
        path, start, length, offsets = await self._on_io(self.ranges.fetch_range, header)
        await self._send_file(conn, {"offsets": offsets}, path, start, length)

    async def _on_remove(self, header: Header, payload: memoryview, conn: Connection) -> None:
        app, shuffle = app_of(header), int_of(header, "shuffle")
        removed = await self._on_io(self.merges.remove, app, shuffle)
        self.ranges.forget(f"{app}/shuffle_{shuffle}/")
        await self._answer(conn, {"removed": removed})

    async def _on_register(self, header: Header, payload: memoryview, conn: Connection) -> None:
        app = app_of(header)
        got = await self._on_io(self.registry.register, app, self._remove_files)
        if isinstance(got, int):
            self.stats.incr("registrations_refused")
            words = "is already registered" if got == 409 else "is one too many"
            raise BadRequest(got, f"application {app} {words}")
        self.stats.incr("apps_registered")
        log.info("shuffle service: application %s registered", app)
        await self._answer(conn, {"secret": got})

    async def _on_unregister(self, header: Header, payload: memoryview, conn: Connection) -> None:
        app = app_of(header)
        removed = await self._on_io(self._unregister, app)
        log.info("shuffle service: application %s unregistered", app)
        await self._answer(conn, {"removed": removed})

    async def _on_renew(self, header: Header, payload: memoryview, conn: Connection) -> None:
        app_of(header)  # renewed by `_authorize`, as every request of the application is
        await self._answer(conn, {"lease_s": self.config.app_lease_s})

    async def _on_stats(self, header: Header, payload: memoryview, conn: Connection) -> None:
        await self._answer(conn, {"stats": self.snapshot()})

    async def _on_push_done(self, header: Header, payload: memoryview, conn: Connection) -> None:
        app, shuffle, merge_id = ids_of(header)
        code = self.merges.push_done(app, shuffle, merge_id, int_of(header, "map"))
        await self._answer(conn, {"code": int(code)})

    async def _on_pushed(self, header: Header, payload: memoryview, conn: Connection) -> None:
        pushed = self.merges.pushed_maps(*ids_of(header))
        await self._answer(conn, {}, pushed.serialize())

    async def _on_io(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the service's I/O threads (never on the loop)."""
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    def _unregister(self, app: str) -> bool:
        removed = self.registry.unregister(app)
        self._remove_files(app)
        return removed

    def _remove_files(self, app: str) -> None:
        self.merges.remove_app(app)
        self.ranges.forget(f"{app}/")

    # --- push ------------------------------------------------------------------------------

    def introduce(self, peers: dict[str, str]) -> int:
        """Learn the directories of the other services on this host (address -> absolute
        local path), whose map outputs a push by reference may then name; how many are known."""
        return self.intake.peers.introduce(peers, self.address)

    # --- answers -----------------------------------------------------------------------------

    async def _answer(self, conn: Connection, header: dict[str, Any], payload: bytes = b"") -> None:
        head = json.dumps(header).encode()
        await conn.send(prefix(Msg.OK, len(head), len(payload)) + head, payload)

    async def _answer_error(self, conn: Connection, status: int, error: str) -> None:
        head = json.dumps({"status": status, "error": error}).encode()
        await conn.send(prefix(Msg.ERROR, len(head), 0) + head)

    async def _refuse(self, conn: Connection, status: int, error: str) -> None:
        """Answer and close: after a bad frame the stream cannot be trusted."""
        self.stats.incr("frames_refused")
        await self._answer_error(conn, status, error)
        await conn.linger_close()

    async def _send_file(
        self,
        conn: Connection,
        header: dict[str, Any],
        path: str,
        start: int,
        n: int,
        before: bytes = b"",
    ) -> None:
        """Answer with `before` and then `n` bytes of the file at `start`, sent from the file."""
        head = json.dumps(header).encode()
        await conn.send(prefix(Msg.OK, len(head), len(before) + n) + head + before)
        if n and isinstance(conn, StreamConnection):
            await send_range(conn, self.store, self._io, path, start, n)
        elif n:
            f = await asyncio.get_running_loop().run_in_executor(
                self._io, self.store.open_read, path
            )
            try:
                await conn.sendfile(f, start, n)
            finally:
                f.close()
        self.stats.incr("served_bytes", n)
