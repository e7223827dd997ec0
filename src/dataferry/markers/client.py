"""Tasks' side of the marker service: an HTTP client, and markers that fall back to direct
markers (saying so once) when the service cannot be reached."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any
from urllib.parse import urlencode

import h11

from ..errors import DataferryError
from ..net import connect
from ..net.addresses import join_host_port, parse_service_url
from ..net.retry import Backoff, retrying
from ..net.tls import normalize_fingerprint
from ..store import Store, paths
from .base import IOType, WriteMarkers, marker_name
from .direct import DirectMarkers
from .files import read_marker_files

log = logging.getLogger("dataferry.markers")

# a kept-alive connection the service closed is found only by using it: one more try, at once,
# on a fresh connection
_RECONNECT = Backoff(0.0, attempts=2)
_CONNECTION_LOST = (OSError, h11.RemoteProtocolError)  # refused, reset, timed out, garbled
_RECV_BYTES = 65536
_warned: set[str] = set()
_warned_lock = threading.Lock()


class ServiceUnavailable(DataferryError):
    pass


class RequestTooLarge(DataferryError):
    """The service refused a request as too large (413): smaller ones, or direct markers."""


# the body a create_batch request may have, in bytes: half the service's default cap
MAX_BATCH_BYTES = 32 * 1024


def batch_sizes(names: Sequence[str], max_bytes: int = MAX_BATCH_BYTES) -> list[int]:
    """How many names go in each request so that each body stays under `max_bytes` as sent
    (JSON bytes: a non-ASCII character can take 6); a lone larger name goes alone."""
    sizes: list[int] = []
    n, size = 0, 64  # room for {"dir": ..., "names": []}
    for name in names:
        cost = len(json.dumps(name)) + 2
        if n and size + cost > max_bytes:
            sizes.append(n)
            n, size = 0, 64
        n, size = n + 1, size + cost
    if n:
        sizes.append(n)
    return sizes


class MarkerClient:
    """A keep-alive HTTP client per thread, with the shared-secret token.

    An `https://` URL is reached over TLS pinned to `fingerprint`; without a fingerprint the
    client talks only to loopback (unless `insecure`): the token never travels in clear text
    off the machine."""

    def __init__(
        self,
        url: str,
        token: str = "",
        timeout: float = 60.0,
        fingerprint: str = "",
        insecure: bool = False,
    ) -> None:
        fingerprint = normalize_fingerprint(fingerprint)
        # the checks every request would fail, made once here (and by DirectConfig on the
        # driver): scheme, host, port, and TLS settings
        _, self._host, self._port = parse_service_url(
            url, fingerprint=fingerprint, insecure=insecure, what="marker service"
        )
        self.url, self.token, self.timeout = url, token, timeout
        self._authority = join_host_port(self._host, self._port)
        self.fingerprint, self.insecure = fingerprint, insecure
        self._local = threading.local()

    def __reduce__(self):
        return (MarkerClient, (self.url, self.token, self.timeout, self.fingerprint, self.insecure))

    def _conn(self) -> tuple[socket.socket, h11.Connection]:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            sock = connect(
                self._host,
                self._port,
                self.timeout,
                self.fingerprint,
                self.insecure,
                "marker service",
            )
            conn = (sock, h11.Connection(h11.CLIENT))
            self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            try:
                conn[0].close()
            except OSError:
                pass

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request on this thread's kept-alive connection (h11 over the socket); tried
        again once on a fresh connection, since the service may have closed an idle one."""
        raw = json.dumps(body).encode() if body is not None else b""
        headers = [("Host", self._authority), ("Content-Length", str(len(raw)))]
        if self.token:
            headers.append(("X-Dataferry-Token", self.token))
        try:
            status, data = retrying(
                lambda: self._exchange(method, path, headers, raw), _RECONNECT, _CONNECTION_LOST
            )
        except _CONNECTION_LOST as e:
            raise ServiceUnavailable(f"marker service {self.url} unreachable: {e}") from None
        if status >= 500:
            raise ServiceUnavailable(f"marker service {self.url}: {status} {data[:200]!r}")
        answer = json.loads(data or b"{}")
        if status == 413:
            raise RequestTooLarge(
                f"marker service {self.url} refused {path}: {answer.get('error')}"
            )
        if status >= 400:
            raise DataferryError(f"marker service {self.url} refused {path}: {answer.get('error')}")
        return answer

    def _exchange(
        self, method: str, path: str, headers: list[tuple[str, str]], raw: bytes
    ) -> tuple[int, bytes]:
        """Send one request and read its answer: (status, body). The connection is dropped
        when it fails or the service closes it."""
        try:
            sock, conn = self._conn()
            out = conn.send(h11.Request(method=method, target=path, headers=headers)) or b""
            if raw:
                out += conn.send(h11.Data(data=raw)) or b""
            sock.sendall(out + (conn.send(h11.EndOfMessage()) or b""))
            conn.receive_data(sock.recv(_RECV_BYTES))  # before asking h11: nothing is there yet
            status, parts = 0, []
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(sock.recv(_RECV_BYTES))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    parts.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise ConnectionError("connection closed by the service")
                # an informational answer (1xx) is skipped
        except BaseException:
            self._drop()
            raise
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:
            self._drop()  # the service said it closes the connection
        return status, b"".join(parts)

    def create(self, directory: str, name: str) -> bool:
        return bool(
            self.request("POST", "/v1/markers/create", {"dir": directory, "name": name})["created"]
        )

    def all(self, directory: str) -> list[str]:
        return list(
            self.request("GET", "/v1/markers/all?" + urlencode({"dir": directory}))["markers"]
        )

    def delete(self, directory: str) -> bool:
        return bool(self.request("POST", "/v1/markers/delete", {"dir": directory})["deleted"])

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/v1/health")


class CreateBatcher:
    """Concurrent marker creates of one process travel together (a group commit): a create
    joins the pending ones, and whichever caller finds a free sending slot sends everything
    pending for a directory in one request. With one task at a time nothing waits; with many
    (tasks as threads, as executors run them) the service gets few large requests instead of
    one per marker. Each create still returns only once its marker is durable."""

    def __init__(self, client: MarkerClient, max_in_flight: int = 4, max_batch: int = 400):
        self.client, self.max_in_flight, self.max_batch = client, max_in_flight, max_batch
        self._cond = threading.Condition()
        self._pending: dict[str, list[tuple[str, Future]]] = {}
        self._sending = 0

    def create(self, directory: str, name: str) -> bool:
        fut: Future = Future()
        with self._cond:
            self._pending.setdefault(directory, []).append((name, fut))
        while not fut.done():
            with self._cond:
                if fut.done():
                    break
                if self._sending >= self.max_in_flight or not self._pending:
                    self._cond.wait(0.05)
                    continue
                self._sending += 1
                directory_, items = next(iter(self._pending.items()))
                head = items[: self.max_batch]
                n = batch_sizes([name for name, _ in head])[0]  # under the service's cap
                batch, rest = items[:n], items[n:]
                if rest:
                    self._pending[directory_] = rest
                else:
                    del self._pending[directory_]
            try:
                self._send(directory_, batch)
            finally:
                with self._cond:
                    self._sending -= 1
                    self._cond.notify_all()
        return bool(fut.result())

    def _send(self, directory: str, batch: list[tuple[str, Future]]) -> None:
        try:
            created = create_all(self.client, directory, [n for n, _ in batch])
        except BaseException as e:
            for _, fut in batch:
                fut.set_exception(e)
            return
        for (_, fut), ok in zip(batch, created, strict=True):
            fut.set_result(ok)


def create_all(client: MarkerClient, directory: str, names: list[str]) -> list[bool]:
    """Create `names` in one request, halving it while the service answers 413 (a service
    with a lower cap than this client assumes); a single name refused so raises."""
    try:
        if len(names) == 1:
            return [client.create(directory, names[0])]
        answer = client.request(
            "POST", "/v1/markers/create_batch", {"dir": directory, "names": names}
        )
        return [bool(c) for c in answer["created"]]
    except RequestTooLarge:
        if len(names) == 1:
            raise
        half = len(names) // 2
        return create_all(client, directory, names[:half]) + create_all(
            client, directory, names[half:]
        )


_batchers: dict[tuple[str, str, str], CreateBatcher] = {}
_batchers_lock = threading.Lock()


def batcher_for(client: MarkerClient) -> CreateBatcher:
    """The process's batcher for a service (shared by every task of the process)."""
    key = (client.url, client.token, client.fingerprint)
    with _batchers_lock:
        if key not in _batchers:
            _batchers[key] = CreateBatcher(client)
        return _batchers[key]


class ServiceMarkers(WriteMarkers):
    """Markers through the service; direct markers while it cannot be reached. Both kinds live
    in the same directory, so listing and rollback see them all."""

    batches = True

    def __init__(self, client: MarkerClient, store: Store, directory: str) -> None:
        self.client = client
        self.store = store
        self.directory = paths.normalize(directory)
        self.direct = DirectMarkers(store, self.directory)

    def __reduce__(self):
        return (ServiceMarkers, (self.client, self.store, self.directory))

    def _fallback(self, e: Exception) -> None:
        with _warned_lock:
            if self.client.url not in _warned:
                _warned.add(self.client.url)
                log.warning("marker service not usable (%s): using direct markers", e)

    def create(self, partition: str, file_name: str, io_type: IOType = IOType.CREATE) -> bool:
        try:
            return batcher_for(self.client).create(
                self.directory, marker_name(partition, file_name, io_type)
            )
        except (ServiceUnavailable, RequestTooLarge) as e:
            self._fallback(e)
            return self.direct.create(partition, file_name, io_type)

    def create_many(
        self, files: Sequence[tuple[str, str]], io_type: IOType = IOType.CREATE
    ) -> list[bool]:
        """All of them in one request (or a few, under the service's size cap)."""
        names = [marker_name(partition, name, io_type) for partition, name in files]
        created: list[bool] = []
        start = 0
        try:
            for n in batch_sizes(names):
                created += create_all(self.client, self.directory, names[start : start + n])
                start += n
            return created
        except (ServiceUnavailable, RequestTooLarge) as e:
            self._fallback(e)
            return created + self.direct.create_many(files[start:], io_type)

    def all(self) -> set[str]:
        """Markers from the service, or straight from its files when it is down, plus any
        direct markers made while it was unreachable."""
        try:
            found = set(self.client.all(self.directory))
        except ServiceUnavailable as e:
            self._fallback(e)
            found = {
                m for names in read_marker_files(self.store, self.directory).values() for m in names
            }
        return found | self.direct.all()

    def delete_all(self) -> None:
        try:
            self.client.delete(self.directory)
        except ServiceUnavailable as e:
            self._fallback(e)
        self.store.delete(self.directory, recursive=True)
