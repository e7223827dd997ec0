"""The marker service: batches marker creation into a few `MARKERS<i>` files (Hudi's design).

Create requests for a marker directory are queued. Every `batch_interval_ms` a dispatcher hands
the queued requests of each directory to one of `num_threads` writer slots; slot i owns the file
`MARKERS<i>` and appends the new markers to it. A request is answered only after its marker is
in the file, so every acknowledged marker survives the service being killed (kill -9): on first
use of a directory the service reloads its markers from the files (lazy loading), and a rollback
can read them without the service at all.

HTTP (JSON bodies and answers; header `X-Dataferry-Token` when a token is set):
    POST /v1/markers/create  {"dir", "name"}  -> {"created": bool}   (false: already existed)
    GET  /v1/markers/exists?dir=&name=        -> {"exists": bool}
    GET  /v1/markers/all?dir=                 -> {"markers": [...]}
    POST /v1/markers/delete  {"dir"}          -> {"deleted": bool}
    GET  /v1/health                           -> {"ok": true, "directories": n}
Malformed requests get a 4xx and the service keeps serving.
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from ..errors import ConfigError
from ..stats import IOStatistics
from ..store import Store, paths
from .base import MARKER_EXTN, MARKERS_ROOT
from .files import (
    MARKERS_TYPE_FILE,
    SERVICE_TYPE,
    markers_file,
    read_marker_files,
    read_marker_type,
)


@dataclass(frozen=True)
class MarkerServiceConfig:
    """
    batch_interval_ms: `hoodie.markers.timeline_server_based.batch.interval_ms` (50).
    num_threads: `hoodie.markers.timeline_server_based.batch.num_threads` (20): writer slots,
        and so `MARKERS<i>` files per directory.
    max_request_bytes: larger request bodies are refused with 413.
    token: shared secret every request must carry ("" for none).
    request_timeout_s: how long a create may wait for its batch.
    """

    batch_interval_ms: int = 50
    num_threads: int = 20
    max_request_bytes: int = 64 * 1024
    token: str = ""
    request_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if self.batch_interval_ms < 1 or self.num_threads < 1:
            raise ConfigError("batch_interval_ms and num_threads must be >= 1")


@dataclass
class _DirState:
    """In-memory state of one marker directory."""

    markers: set[str] = field(default_factory=set)
    pending: list[tuple[str, Future]] = field(default_factory=list)
    busy: list[bool] = field(default_factory=list)
    last_slot: int = -1
    type_written: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class MarkerService:
    """The batching marker service over a destination store (start() / stop())."""

    def __init__(self, store: Store, config: MarkerServiceConfig | None = None) -> None:
        self.store = store
        self.config = config or MarkerServiceConfig()
        self.stats = IOStatistics()
        self._states: dict[str, _DirState] = {}
        self._states_lock = threading.Lock()
        self._writers = ThreadPoolExecutor(
            self.config.num_threads, thread_name_prefix="markers-batch"
        )
        self._stop = threading.Event()
        self._dispatcher: threading.Thread | None = None
        self._server: ThreadingHTTPServer | None = None
        self._serve_thread: threading.Thread | None = None

    # --- marker operations -----------------------------------------------------------------

    def _state(self, directory: str) -> _DirState:
        state = self._states.get(directory)
        if state is not None:
            return state
        with self._states_lock:
            state = self._states.get(directory)
            if state is None:  # lazy load: the files are read on first use only
                state = _DirState(busy=[False] * self.config.num_threads)
                for names in read_marker_files(self.store, directory).values():
                    state.markers.update(names)
                state.type_written = read_marker_type(self.store, directory) is not None
                self._states[directory] = state
        return state

    def create(self, directory: str, name: str) -> bool:
        """Queue a create; returns once it is durably recorded (True) or found to exist."""
        fut: Future = Future()
        state = self._state(directory)
        with state.lock:
            state.pending.append((name, fut))
        self.stats.incr("marker_create_requests")
        return fut.result(timeout=self.config.request_timeout_s)

    def exists(self, directory: str, name: str) -> bool:
        return name in self._state(directory).markers

    def all(self, directory: str) -> list[str]:
        return sorted(self._state(directory).markers)

    def delete(self, directory: str) -> bool:
        with self._states_lock:
            self._states.pop(directory, None)
        return self.store.delete(directory, recursive=True)

    # --- batching --------------------------------------------------------------------------

    def _dispatch_forever(self) -> None:
        interval = self.config.batch_interval_ms / 1000.0
        while not self._stop.wait(interval):
            self._dispatch_once()

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
        self, directory: str, state: _DirState, slot: int, batch: list[tuple[str, Future]]
    ) -> None:
        results: list[tuple[Future, bool]] = []
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
                fut.set_exception(e)
            return
        finally:
            with state.lock:
                state.busy[slot] = False
        self.stats.incr("marker_batches")
        for fut, fresh in results:
            fut.set_result(fresh)

    # --- the network server ----------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0) -> MarkerService:
        self._dispatcher = threading.Thread(
            target=self._dispatch_forever, name="markers-dispatch", daemon=True
        )
        self._dispatcher.start()
        self._server = _Server((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever, name="markers-http", daemon=True
        )
        self._serve_thread.start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._writers.shutdown(wait=True)

    def __enter__(self) -> MarkerService:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # hundreds of tasks connect at once; the default backlog is 5
    daemon_threads = True


def _valid_dir(directory: Any) -> str:
    if not isinstance(directory, str):
        raise ValueError("'dir' must be a string")
    d = paths.normalize(directory)
    if not paths.is_under(d, MARKERS_ROOT) or d == MARKERS_ROOT:
        raise ValueError(f"'dir' must lie under {MARKERS_ROOT}/")
    return d


def _valid_name(name: Any) -> str:
    if not isinstance(name, str):
        raise ValueError("'name' must be a string")
    n = paths.normalize(name)
    if MARKER_EXTN + "." not in n or "\n" in n:
        raise ValueError(f"not a marker name: {name!r}")
    return n


def _handler_for(service: MarkerService) -> type[BaseHTTPRequestHandler]:
    config = service.config

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "dataferry-markers/1"

        def log_message(self, *args: Any) -> None:  # quiet: the service is used by many tasks
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            # headers and body in one write: two small writes meet Nagle and delayed ACK
            self._headers_buffer.append(b"\r\n")  # type: ignore[attr-defined]
            payload = b"".join(self._headers_buffer) + raw  # type: ignore[attr-defined]
            self._headers_buffer = []  # type: ignore[attr-defined]
            self.wfile.write(payload)

        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _authorised(self) -> bool:
            if not config.token:
                return True
            given = self.headers.get("X-Dataferry-Token", "")
            if hmac.compare_digest(given.encode(), config.token.encode()):
                return True
            self._send(401, {"error": "missing or wrong token"})
            return False

        def _body(self) -> dict[str, Any] | None:
            length = self.headers.get("Content-Length")
            if length is None:
                self._send(411, {"error": "Content-Length required"})
                return None
            try:
                n = int(length)
            except ValueError:
                self._send(400, {"error": "bad Content-Length"})
                return None
            if n < 0 or n > config.max_request_bytes:
                self.close_connection = True
                self._send(413, {"error": f"request larger than {config.max_request_bytes} bytes"})
                return None
            try:
                data = json.loads(self.rfile.read(n) or b"{}")
            except (UnicodeDecodeError, json.JSONDecodeError):
                self._send(400, {"error": "body is not JSON"})
                return None
            if not isinstance(data, dict):
                self._send(400, {"error": "body must be a JSON object"})
                return None
            return data

        def do_GET(self) -> None:
            if not self._authorised():
                return
            url = urlparse(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            try:
                if url.path == "/v1/health":
                    self._send(
                        200,
                        {
                            "ok": True,
                            "directories": len(service._states),
                            "service": service.stats.snapshot()["counters"],
                            "store": service.store.stats.snapshot()["counters"],
                        },
                    )
                elif url.path == "/v1/markers/exists":
                    self._send(
                        200,
                        {
                            "exists": service.exists(
                                _valid_dir(q.get("dir")), _valid_name(q.get("name"))
                            )
                        },
                    )
                elif url.path == "/v1/markers/all":
                    self._send(200, {"markers": service.all(_valid_dir(q.get("dir")))})
                else:
                    self._send(404, {"error": f"no such endpoint {url.path}"})
            except (ValueError, ConfigError) as e:
                self._send(400, {"error": str(e)})
            except Exception as e:  # a store failure: the client may retry or fall back
                self._send(503, {"error": f"{type(e).__name__}: {e}"})

        def do_POST(self) -> None:
            if not self._authorised():
                return
            data = self._body()
            if data is None:
                return
            path = urlparse(self.path).path
            try:
                if path == "/v1/markers/create":
                    start = time.perf_counter()
                    created = service.create(
                        _valid_dir(data.get("dir")), _valid_name(data.get("name"))
                    )
                    service.stats.record_duration("marker_create", time.perf_counter() - start)
                    self._send(200, {"created": created})
                elif path == "/v1/markers/delete":
                    self._send(200, {"deleted": service.delete(_valid_dir(data.get("dir")))})
                else:
                    self._send(404, {"error": f"no such endpoint {path}"})
            except (ValueError, ConfigError) as e:
                self._send(400, {"error": str(e)})
            except Exception as e:
                self._send(503, {"error": f"{type(e).__name__}: {e}"})

    return Handler
