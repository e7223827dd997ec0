"""The marker service: batches marker creation into a few `MARKERS<i>` files (Hudi's design).

Create requests for a marker directory are queued. Every `batch_interval_ms` a dispatcher hands
the queued requests of each directory to one of `num_threads` writer slots; slot i owns the file
`MARKERS<i>` and appends the new markers to it. A request is answered only after its marker is
in the file, so every acknowledged marker survives the service being killed (kill -9): on first
use of a directory the service reloads its markers from the files (lazy loading), and a rollback
can read them without the service at all.

HTTP (JSON bodies and answers; header `X-Dataferry-Token` when a token is set):
    POST /v1/markers/create  {"dir", "name"}  -> {"created": bool}   (false: already existed)
    POST /v1/markers/create_batch {"dir", "names"} -> {"created": [bool, ...]}
    GET  /v1/markers/exists?dir=&name=        -> {"exists": bool}
    GET  /v1/markers/all?dir=                 -> {"markers": [...]}
    POST /v1/markers/delete  {"dir"}          -> {"deleted": bool}
    GET  /v1/health                           -> {"ok": true, "directories": n}
Every malformed request gets a 4xx (and, when the stream can no longer be trusted, a close);
the service keeps serving. The token is checked from the request head before a body is read.
Directories idle for `state_idle_s` are dropped from memory (their markers are on the store,
and are loaded again on next use).

Ownership: a created marker's data file must carry the tag of the job whose directory it is
created in (`ownership.py`: `<name>-<job8>-t<task>-a<attempt>.<ext>`, or Hudi's base file name
with the directory's instant), so a token holder cannot mark, and have a rollback delete,
another job's or a committed file; 400 otherwise.

Confinement: every marker directory a request names must lie inside the markers root
(`_dataferry/markers/<...>`): a '..', an absolute path, a scheme or the root itself is refused
with 400, and so is a directory any component of which is a symbolic link (or a file) on the
store, checked when the directory is first used and before every delete. A token holder can
therefore never make the service write or delete outside the markers root (a committed
partition, say).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from ..errors import ConfigError
from ..net import BackgroundServer, ConnectionLimits, TLSChoice, resolve_tls, this_connection
from ..net.connection import peer_host
from ..stats import IOStatistics
from ..store import Store, paths
from .base import MARKER_ROOTS, BadMarker, check_marker_name, data_path
from .files import (
    MARKERS_TYPE_FILE,
    SERVICE_TYPE,
    markers_file,
    read_marker_files,
    read_marker_type,
)
from .http import HttpConnection, HttpError
from .ownership import owned_by_marker_dir, tag_hint

log = logging.getLogger("dataferry.markers")
# an endpoint: the request's arguments -> (HTTP status, JSON answer)
Endpoint = Callable[[dict[str, Any]], Awaitable[tuple[int, dict[str, Any]]]]


@dataclass(frozen=True)
class MarkerServiceConfig:
    """
    batch_interval_ms: `hoodie.markers.timeline_server_based.batch.interval_ms` (50).
    num_threads: `hoodie.markers.timeline_server_based.batch.num_threads` (20): writer slots,
        and so `MARKERS<i>` files per directory.
    max_request_bytes: larger request bodies (in bytes) are refused with 413.
    token: shared secret every request must carry ("" for none). Never shown by repr().
    request_timeout_s: how long a create may wait for its batch.
    state_idle_s / max_directories: a directory's in-memory state is dropped after this long
        unused, and the least recently used are dropped past this many directories.
    limits: timeouts, the cap of connections per client address, and the largest request head
        (read before the token is checked).
    """

    batch_interval_ms: int = 50
    num_threads: int = 20
    max_request_bytes: int = 64 * 1024
    token: str = field(default="", repr=False)
    request_timeout_s: float = 60.0
    state_idle_s: float = 60.0
    max_directories: int = 1024
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)

    def __post_init__(self) -> None:
        if self.batch_interval_ms < 1 or self.num_threads < 1 or self.max_directories < 1:
            raise ConfigError("batch_interval_ms, num_threads and max_directories must be >= 1")


@dataclass
class _DirState:
    """In-memory state of one marker directory."""

    markers: set[str] = field(default_factory=set)
    pending: list[tuple[str, Any]] = field(default_factory=list)  # (name, asyncio future)
    busy: list[bool] = field(default_factory=list)
    last_slot: int = -1
    type_written: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_used: float = field(default_factory=time.monotonic)

    def idle_since(self, when: float) -> bool:
        """Unused since `when`, with nothing queued or being written (safe to drop)."""
        with self.lock:
            return self.last_used < when and not self.pending and not any(self.busy)


class MarkerService:
    """The batching marker service over a destination store (start() / stop()).

    The network side is one asyncio event loop in its own thread (no thread per connection);
    writing `MARKERS<i>` files happens on `num_threads` writer threads.
    """

    def __init__(self, store: Store, config: MarkerServiceConfig | None = None) -> None:
        self.store = store
        self.config = config or MarkerServiceConfig()
        self.stats = IOStatistics()
        self._states: dict[str, _DirState] = {}
        self._states_lock = threading.Lock()
        self._writers = ThreadPoolExecutor(
            self.config.num_threads, thread_name_prefix="markers-batch"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = BackgroundServer(
            self._connection,
            "markers-loop",
            limit=self.config.limits.max_unauthenticated_bytes,  # the largest request head
            limits=self.config.limits,
        )
        self._dispatcher: asyncio.Task | None = None
        self._routes = self._route_table()

    # --- marker operations (state is touched by the loop and by writer threads) -------------

    def _state(self, directory: str) -> _DirState:
        state = self._states.get(directory)
        if state is not None:
            state.last_used = time.monotonic()
            return state
        with self._states_lock:
            state = self._states.get(directory)
            if state is None:  # lazy load: the files are read on first use only
                self._check_no_links(directory)
                state = _DirState(busy=[False] * self.config.num_threads)
                for names in read_marker_files(self.store, directory).values():
                    state.markers.update(names)
                state.type_written = read_marker_type(self.store, directory) is not None
                self._states[directory] = state
        return state

    async def create(self, directory: str, name: str) -> bool:
        """Queue a create; returns once it is durably recorded (True) or found to exist."""
        loop = asyncio.get_running_loop()
        while True:
            state = self._states.get(directory) or await loop.run_in_executor(
                self._writers, self._state, directory
            )
            if self._states.get(directory) is state:  # not dropped while it was loading
                break
        fut: asyncio.Future = loop.create_future()
        with state.lock:
            state.pending.append((name, fut))
            state.last_used = time.monotonic()
        self.stats.incr("marker_create_requests")
        return await asyncio.wait_for(fut, self.config.request_timeout_s)

    async def exists(self, directory: str, name: str) -> bool:
        state = await asyncio.get_running_loop().run_in_executor(
            self._writers, self._state, directory
        )
        with state.lock:
            return name in state.markers

    async def all(self, directory: str) -> list[str]:
        state = await asyncio.get_running_loop().run_in_executor(
            self._writers, self._state, directory
        )
        with state.lock:
            return sorted(state.markers)

    async def delete(self, directory: str) -> bool:
        def delete() -> bool:
            self._check_no_links(directory)
            with self._states_lock:
                self._states.pop(directory, None)
            return self.store.delete(directory, recursive=True)

        return await asyncio.get_running_loop().run_in_executor(self._writers, delete)

    def _check_no_links(self, directory: str) -> None:
        """Refuse (ValueError: 400) a marker directory with a link or a file on its way: the
        service's writes and deletes must stay inside the markers root. Components are
        looked up as listed (links are listed as themselves, never followed)."""
        parent = ""
        for part in directory.split("/"):
            path = paths.join(parent, part)
            entry = next((e for e in self.store.list_or_empty(parent) if e.path == path), None)
            if entry is None:
                return  # not there yet: it will be created as a directory
            if entry.is_link or not entry.is_dir:
                self.stats.incr("directories_refused")
                raise ValueError(f"marker directory {directory!r}: {path!r} is not a directory")
            parent = path

    # --- batching --------------------------------------------------------------------------

    async def _dispatch_forever(self) -> None:
        interval = self.config.batch_interval_ms / 1000.0
        next_sweep = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            self._dispatch_once()
            if time.monotonic() >= next_sweep or len(self._states) > self.config.max_directories:
                self._drop_idle()
                next_sweep = time.monotonic() + min(1.0, self.config.state_idle_s / 4)

    def _drop_idle(self) -> None:
        """Forget directories unused for `state_idle_s`, and the least recently used past
        `max_directories` (never one with creates queued or being written)."""
        now = time.monotonic()
        with self._states_lock:
            by_age = sorted(self._states.items(), key=lambda kv: kv[1].last_used)
            excess = len(by_age) - self.config.max_directories
            for directory, state in by_age:
                old = now - self.config.state_idle_s
                if state.idle_since(now if excess > 0 else old):
                    del self._states[directory]
                    excess -= 1
                    self.stats.incr("directories_dropped")

    def _dispatch_once(self) -> None:
        for directory, state in list(self._states.items()):
            with state.lock:
                if not state.pending:
                    continue
                slot = self._free_slot(state)
                if slot is None:
                    continue  # every MARKERS file of the directory is being written
                batch, state.pending = state.pending, []
            self._writers.submit(self._process, directory, state, slot, batch)

    def _free_slot(self, state: _DirState) -> int | None:
        n = len(state.busy)
        for i in range(n):
            slot = (state.last_slot + 1 + i) % n
            if not state.busy[slot]:
                state.busy[slot] = True
                state.last_slot = slot
                return slot
        return None

    def _process(
        self, directory: str, state: _DirState, slot: int, batch: list[tuple[str, Any]]
    ) -> None:
        loop = self._loop
        assert loop is not None
        results: list[tuple[Any, bool]] = []
        new: list[str] = []
        with state.lock:
            for name, fut in batch:
                fresh = name not in state.markers and name not in new
                if fresh:
                    new.append(name)
                results.append((fut, fresh))
        try:
            if not state.type_written:
                self.store.create_if_absent(
                    paths.join(directory, MARKERS_TYPE_FILE), SERVICE_TYPE.encode()
                )
                state.type_written = True
            if new:
                self.store.append_bytes(
                    markers_file(directory, slot), "".join(n + "\n" for n in new).encode()
                )
                self.stats.incr("marker_file_writes")
            with state.lock:
                state.markers.update(new)  # known only once durable
        except BaseException as e:
            for fut, _ in results:
                loop.call_soon_threadsafe(_settle, fut, None, e)
            return
        finally:
            with state.lock:
                state.busy[slot] = False
        self.stats.incr("marker_batches")
        for fut, fresh in results:
            loop.call_soon_threadsafe(_settle, fut, fresh, None)

    # --- the network server ----------------------------------------------------------------

    def start(
        self, host: str = "127.0.0.1", port: int = 0, tls: TLSChoice = "auto"
    ) -> MarkerService:
        """Bind and serve; `tls` is an identity, None (plain), or "auto": TLS with a fresh
        self-signed identity beyond loopback, plain on loopback."""

        def begin(loop: asyncio.AbstractEventLoop) -> None:
            self._loop = loop
            self._dispatcher = loop.create_task(self._dispatch_forever())

        self._server.start(host, port, on_loop=begin, tls=resolve_tls(host, tls))
        log.info("marker service listening on %s (%s)", self.url, self._server.tls_note)
        return self

    @property
    def url(self) -> str:
        scheme = "https" if self.fingerprint else "http"
        return f"{scheme}://{self._server.advertised_address}"  # for 0.0.0.0: this host's

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the service's certificate ("" when plain): what clients pin."""
        return self._server.fingerprint

    def stop(self) -> None:
        stopped = self._server.stop()
        self._writers.shutdown(wait=True)
        if stopped:
            log.info("marker service on %s stopped", self.url)

    def __enter__(self) -> MarkerService:
        return self.start() if self._loop is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        limits = self.config.limits
        http = HttpConnection(reader, writer, limits.max_unauthenticated_bytes)
        slot = this_connection()  # silent or idle, it may be closed to admit another (net)
        wait = limits.read_timeout_s  # a new connection must send its first request promptly
        while True:
            try:
                head = await http.read_head(wait)
                if head is None:
                    return
                if self.config.token and not head.has_token(self.config.token):
                    self.stats.incr("requests_unauthorized")
                    raise HttpError(401, "missing or wrong token")
                slot.authenticated()  # serving a request from now on
                n = head.content_length(self.config.max_request_bytes)
                body = await http.read_body(n, limits.read_timeout_s)
                if body is None:
                    return
            except HttpError as e:
                self.stats.incr("requests_refused")
                await http.respond(e.status, {"error": str(e)}, close=True)
                return
            peer = peer_host(writer.get_extra_info("peername"))
            self.stats.incr(f"requests_from.{peer}")  # per client host
            status, answer = await self._route(head.method, head.target, body)
            if not await http.respond(status, answer):
                return  # the client asked to close (or spoke HTTP/1.0)
            slot.idle()
            wait = limits.idle_timeout_s

    def _route_table(self) -> dict[tuple[str, str], Endpoint]:
        """What answers each (method, path): a new endpoint joins with one row here and one
        method below. Each gets the request's arguments (the query of a GET, the JSON object
        of a POST)."""
        return {
            ("GET", "/v1/health"): self._on_health,
            ("GET", "/v1/markers/exists"): self._on_exists,
            ("GET", "/v1/markers/all"): self._on_all,
            ("POST", "/v1/markers/create"): self._on_create,
            ("POST", "/v1/markers/create_batch"): self._on_create_batch,
            ("POST", "/v1/markers/delete"): self._on_delete,
        }

    async def _route(self, method: str, target: str, body: bytes) -> tuple[int, dict[str, Any]]:
        url = urlparse(target)
        if method not in {m for m, _ in self._routes}:
            return 405, {"error": f"method {method} not allowed"}
        try:
            if method == "GET":
                args: Any = {k: v[0] for k, v in parse_qs(url.query).items()}
            else:
                try:
                    args = json.loads(body or b"{}")
                except (ValueError, RecursionError):  # not JSON, or nested too deep
                    return 400, {"error": "body is not JSON"}
                if not isinstance(args, dict):
                    return 400, {"error": "body must be a JSON object"}
            endpoint = self._routes.get((method, url.path))
            if endpoint is None:
                return 404, {"error": f"no such endpoint {url.path}"}
            return await endpoint(args)
        except (ValueError, ConfigError) as e:
            return 400, {"error": str(e)}
        except Exception as e:  # a store failure: the client may retry or fall back
            return 503, {"error": f"{type(e).__name__}: {e}"}

    # --- the endpoints, one per (method, path) -----------------------------------------------

    async def _on_health(self, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {
            "ok": True,
            "directories": len(self._states),
            "connections": self._server.open_connections,
            "net": self._server.stats.snapshot()["counters"],
            "service": self.stats.snapshot()["counters"],
            "store": self.store.stats.snapshot()["counters"],
        }

    async def _on_exists(self, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        directory, name = _valid_dir(args.get("dir")), check_marker_name(args.get("name"))
        return 200, {"exists": await self.exists(directory, name)}

    async def _on_all(self, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"markers": await self.all(_valid_dir(args.get("dir")))}

    async def _on_create(self, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        start = time.perf_counter()
        directory = _valid_dir(args.get("dir"))
        created = await self.create(directory, _marker_of(directory, args.get("name")))
        self.stats.record_duration("marker_create", time.perf_counter() - start)
        return 200, {"created": created}

    async def _on_create_batch(self, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        directory = _valid_dir(args.get("dir"))
        names = args.get("names")
        if not isinstance(names, list) or not names:
            return 400, {"error": "names must be a non-empty list"}
        names = [_marker_of(directory, n) for n in names]  # all, before any is made
        start = time.perf_counter()
        created = await asyncio.gather(*(self.create(directory, n) for n in names))
        self.stats.record_duration("marker_create_batch", time.perf_counter() - start)
        return 200, {"created": list(created)}

    async def _on_delete(self, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {"deleted": await self.delete(_valid_dir(args.get("dir")))}


def _settle(fut: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def _marker_of(directory: str, name: Any) -> str:
    """`name`, if it is a marker a writer of `directory`'s job could have made: its data file
    carries the job's tag. A marker naming any other file (a committed one, say) would make a
    rollback of the job delete it; refused before it is recorded."""
    name = check_marker_name(name)
    if not owned_by_marker_dir(directory, data_path(name)):
        raise BadMarker(
            f"marker {name[:200]!r} names a file the job of {directory} did not write: "
            f"its name must end {tag_hint(directory)}"
        )
    return name


_DIR = re.compile(r"[^\x00-\x1f\x7f\\]{1,1024}")  # the whole name: no newline, no control


def _valid_dir(directory: Any) -> str:
    if not isinstance(directory, str) or not _DIR.fullmatch(directory):
        raise ValueError("'dir' must be a path of printable characters")
    d = paths.normalize(directory)
    if not any(paths.is_under(d, root) and d != root for root in MARKER_ROOTS):
        raise ValueError(f"'dir' must lie under one of {', '.join(MARKER_ROOTS)}")
    return d
