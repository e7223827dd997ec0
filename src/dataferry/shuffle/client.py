"""A blocking client of the shuffle service: one TCP connection, requests answered in turn.

Used by pushers (map side), readers (reduce side) and the driver (finalize, remove). It counts
its requests and bytes so that benchmarks can report reduce-side reads. Connection failures
raise ShuffleServiceUnavailable; an ERROR answer raises ShuffleError with the service's words.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import DataferryError, ShuffleError, ShuffleServiceUnavailable
from ..extras import require
from ..net import connect
from ..net.addresses import parse_service_address
from ..net.tls import normalize_fingerprint
from ..stats import IOStatistics
from .blocks import Pieces
from .merge import MergeStatus, PushCode
from .protocol import FRAME_MAGIC, PREFIX, Msg, prefix
from .tenancy import AppCredentials

BitMap = require("pyroaring", "the push shuffle").BitMap

PushBlock = bytes | memoryview | Pieces  # a framed block, whole or as (header, payload)


class ServiceRefused(ShuffleError):
    def __init__(self, address: str, status: int, error: str) -> None:
        super().__init__(f"shuffle service {address} refused: {status} {error}")
        self.status = status


class ShuffleClient:
    """`fingerprint` pins the service's TLS certificate (TLS is used when it is given); without
    one the client only talks to loopback, unless `insecure` says clear text is fine.

    With `credentials` that hold a secret for `address`, the connection speaks for that
    application (every request on its data needs this); otherwise it says HELLO with the
    service-wide `token`, which only registers applications and reads statistics."""

    def __init__(
        self,
        address: str,
        token: str = "",
        timeout: float = 60.0,
        stats: IOStatistics | None = None,
        fingerprint: str = "",
        insecure: bool = False,
        credentials: AppCredentials | None = None,
    ) -> None:
        self.credentials = credentials
        self._host, self._port = parse_service_address(address, "shuffle service")
        self.address, self.token, self.timeout = address, token, timeout
        self.fingerprint, self.insecure = normalize_fingerprint(fingerprint), insecure
        self.stats = stats if stats is not None else IOStatistics()
        self._sock: socket.socket | None = None

    def __repr__(self) -> str:
        app = self.credentials.app if self.credentials is not None else ""
        return f"ShuffleClient({self.address!r}, app={app!r})"  # never a secret

    def __reduce__(self):
        return (
            ShuffleClient,
            (
                self.address,
                self.token,
                self.timeout,
                None,
                self.fingerprint,
                self.insecure,
                self.credentials,
            ),
        )

    def _hello(self) -> dict[str, Any]:
        creds = self.credentials
        secret = creds.secret_for(self.address) if creds is not None else ""
        if creds is not None and secret:
            return {"app": creds.app, "secret": secret}
        return {"token": self.token}

    def _conn(self) -> socket.socket:
        if self._sock is not None and _closed_by_peer(self._sock):
            self.close()  # the service closed an idle connection: open a fresh one
        if self._sock is None:
            try:
                sock = connect(
                    self._host,
                    self._port,
                    self.timeout,
                    self.fingerprint,
                    self.insecure,
                    "shuffle service",
                )
            except OSError as e:
                raise ShuffleServiceUnavailable(
                    f"shuffle service {self.address} unreachable: {e}"
                ) from None
            except DataferryError as e:
                raise ShuffleError(str(e)) from None
            self._sock = sock
            self._exchange(Msg.HELLO, self._hello())
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> ShuffleClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def request(
        self, msg: Msg, header: dict[str, Any], payload: bytes | memoryview = b""
    ) -> tuple[dict[str, Any], memoryview]:
        self._conn()
        return self._exchange(msg, header, payload)

    def _exchange(
        self, msg: Msg, header: dict[str, Any], payload: bytes | memoryview | list = b""
    ) -> tuple[dict[str, Any], memoryview]:
        sock = self._sock
        assert sock is not None
        parts = payload if isinstance(payload, list) else [payload]
        head = json.dumps(header).encode()
        try:
            _send_parts(sock, [prefix(msg, len(head), sum(len(p) for p in parts)) + head, *parts])
            magic, kind, header_len, payload_len = PREFIX.unpack(_recv(sock, PREFIX.size))
            answer = json.loads(_recv(sock, header_len)) if header_len else {}
            body = _recv(sock, payload_len)
        except OSError as e:
            self.close()
            raise ShuffleServiceUnavailable(f"shuffle service {self.address}: {e}") from None
        if magic != FRAME_MAGIC:
            self.close()
            raise ShuffleServiceUnavailable(f"shuffle service {self.address}: bad answer frame")
        self.stats.incr("requests")
        self.stats.incr("bytes_received", payload_len)
        if kind == Msg.ERROR:
            if answer.get("status") in (400, 401, 413, 429):
                self.close()  # the service closes the connection after refusing a frame
            raise ServiceRefused(self.address, answer.get("status", 0), answer.get("error", ""))
        return answer, memoryview(body)

    # --- operations ----------------------------------------------------------------------------

    def register(self, app: str) -> str:
        """Register an application (on a connection with the service-wide token); its
        credential on this service. Refused (409) while the id is live."""
        answer, _ = self.request(Msg.REGISTER, {"app": app})
        return str(answer["secret"])

    def unregister(self, app: str) -> bool:
        """Free the application id and delete its files (with the application's credential)."""
        answer, _ = self.request(Msg.UNREGISTER, {"app": app})
        return bool(answer["removed"])

    def renew(self, app: str) -> float:
        """Renew the application's lease (with its credential); the service's lease, in
        seconds (`ShuffleServiceConfig.app_lease_s`)."""
        answer, _ = self.request(Msg.RENEW, {"app": app})
        return float(answer["lease_s"])

    def push(
        self,
        app: str,
        shuffle: int,
        merge_id: int,
        blocks: Sequence[tuple[int, int, PushBlock]],
    ) -> list[PushCode]:
        """Push framed blocks [(map, reduce, block)], a block as bytes or as its pieces
        (header, payload), sent as they are; one code per block."""
        self._conn()
        header = {
            "app": app,
            "shuffle": shuffle,
            "merge_id": merge_id,
            "blocks": [[m, r, block_size(b)] for m, r, b in blocks],
        }
        parts: list[bytes | memoryview] = []
        for _, _, b in blocks:
            parts.extend(b if isinstance(b, tuple) else (b,))
        answer, _ = self._exchange(Msg.PUSH, header, parts)
        self.stats.incr("push_requests")
        return [PushCode(c) for c in answer["codes"]]

    def push_ref(
        self,
        app: str,
        shuffle: int,
        merge_id: int,
        map_index: int,
        attempt: int,
        source: str,
        refs: Sequence[tuple[int, int, int]],
    ) -> list[PushCode]:
        """Push blocks by reference: [(reduce, offset, length)] of map output (map, attempt)
        on the service at `source` (this one, or a peer on its host that it was introduced
        to), which the service reads from the file itself; one code per block. A service
        that does not know `source` refuses with 404 (the blocks are then pushed as bytes).
        The application's credential at `source` goes along: a peer's map outputs are read
        only for the tenant that registered the application there."""
        creds = self.credentials
        header = {
            "app": app,
            "shuffle": shuffle,
            "merge_id": merge_id,
            "map": map_index,
            "attempt": attempt,
            "from": source,
            "secret": creds.secret_for(source) if creds is not None and source else "",
            "blocks": [list(ref) for ref in refs],
        }
        answer, _ = self.request(Msg.PUSH_REF, header)
        self.stats.incr("push_ref_requests")
        return [PushCode(c) for c in answer["codes"]]

    def introduce(self, peers: dict[str, str]) -> int:
        """Tell the service the directories of the other services on its host (address ->
        directory), so pushes by reference may name their map outputs (on a connection with
        the service-wide token); how many it knows."""
        answer, _ = self.request(Msg.PEERS, {"peers": peers})
        return int(answer["peers"])

    def push_done(self, app: str, shuffle: int, merge_id: int, map_index: int) -> PushCode:
        """Tell the merger this map pushes no more to the merge (its push completion)."""
        header = {"app": app, "shuffle": shuffle, "merge_id": merge_id, "map": map_index}
        answer, _ = self.request(Msg.PUSH_DONE, header)
        return PushCode(answer["code"])

    def pushed_maps(self, app: str, shuffle: int, merge_id: int) -> BitMap:
        """The maps whose pushes to this merger are complete."""
        header = {"app": app, "shuffle": shuffle, "merge_id": merge_id}
        _, body = self.request(Msg.PUSHED, header)
        return BitMap.deserialize(bytes(body))

    def finalize(self, app: str, shuffle: int, merge_id: int) -> list[MergeStatus]:
        answer, body = self.request(
            Msg.FINALIZE, {"app": app, "shuffle": shuffle, "merge_id": merge_id}
        )
        statuses, pos = [], 0
        for reduce_id, size, length in answer["statuses"]:
            statuses.append(
                MergeStatus(reduce_id, BitMap.deserialize(body[pos : pos + length]), size)
            )
            pos += length
        return statuses

    def merged_meta(
        self, app: str, shuffle: int, merge_id: int, reduce_id: int
    ) -> tuple[memoryview, memoryview]:
        """(index bytes, meta bytes) of a finalized merged partition."""
        header = {"app": app, "shuffle": shuffle, "merge_id": merge_id, "reduce": reduce_id}
        answer, body = self.request(Msg.MERGED_META, header)
        n = int(answer["index_len"])
        self._count_read(body)
        return body[:n], body[n:]

    def merged_partition(
        self, app: str, shuffle: int, merge_id: int, reduce_id: int
    ) -> tuple[memoryview, memoryview, memoryview]:
        """(index, meta, data) of a finalized merged partition, in one read."""
        header = {"app": app, "shuffle": shuffle, "merge_id": merge_id, "reduce": reduce_id}
        answer, body = self.request(Msg.MERGED_PARTITION, header)
        n, m = int(answer["index_len"]), int(answer["meta_len"])
        if n + m > len(body):
            raise ShuffleError(f"shuffle service {self.address}: merged partition answer short")
        self._count_read(body)
        return body[:n], body[n : n + m], body[n + m :]

    def merged_chunk(
        self, app: str, shuffle: int, merge_id: int, reduce_id: int, chunk: int
    ) -> memoryview:
        header = {
            "app": app,
            "shuffle": shuffle,
            "merge_id": merge_id,
            "reduce": reduce_id,
            "chunk": chunk,
        }
        _, body = self.request(Msg.MERGED_CHUNK, header)
        self._count_read(body)
        return body

    def fetch(
        self, app: str, shuffle: int, map_index: int, attempt: int, start: int, end: int
    ) -> tuple[list[int], memoryview]:
        """Original blocks of one map attempt for reduces [start, end): (offsets, bytes)."""
        header = {
            "app": app,
            "shuffle": shuffle,
            "map": map_index,
            "attempt": attempt,
            "start": start,
            "end": end,
        }
        answer, body = self.request(Msg.FETCH, header)
        self._count_read(body)
        return answer["offsets"], body

    def _count_read(self, body: memoryview) -> None:
        """A reduce-side read: what benchmarks compare between pull and push."""
        self.stats.incr("reduce_reads")
        self.stats.incr("reduce_read_bytes", len(body))

    def remove(self, app: str, shuffle: int) -> bool:
        answer, _ = self.request(Msg.REMOVE, {"app": app, "shuffle": shuffle})
        return bool(answer["removed"])

    def service_stats(self) -> dict[str, Any]:
        return self.request(Msg.STATS, {})[0]["stats"]


def register_app(
    app: str,
    addresses: Iterable[str],
    token: str,
    *,
    fingerprint: str = "",
    insecure: bool = False,
    timeout: float = 60.0,
) -> AppCredentials:
    """Register `app` on every service with the service-wide `token`; its credentials, to
    hand to the application's tasks."""
    creds = AppCredentials(app)
    for address in addresses:
        with ShuffleClient(
            address, token, timeout=timeout, fingerprint=fingerprint, insecure=insecure
        ) as c:
            creds = creds.with_secret(address, c.register(app))
    return creds


def unregister_app(
    credentials: AppCredentials, *, fingerprint: str = "", insecure: bool = False
) -> dict[str, bool]:
    """Free the application id on every service it is registered with (its files go too)."""
    done: dict[str, bool] = {}
    for address in credentials.addresses:
        try:
            with ShuffleClient(
                address, credentials=credentials, fingerprint=fingerprint, insecure=insecure
            ) as c:
                done[address] = c.unregister(credentials.app)
        except ShuffleError:
            done[address] = False
    return done


IOV_MAX = 1024  # buffers per sendmsg call (Linux's limit)
SMALL_PART = 1024  # over TLS: parts below this (headers) are gathered into one write


def _send_parts(sock: socket.socket, parts: Sequence[bytes | memoryview]) -> None:
    """Send parts in order, each from its own buffer, never copied: one gathering sendmsg
    for many parts on a plain socket; over TLS (no sendmsg) headers are gathered and payloads
    written as they are."""
    if isinstance(sock, ssl.SSLSocket):
        small = bytearray()
        for part in parts:
            if len(part) < SMALL_PART:
                small += part
                continue
            if small:
                sock.sendall(small)
                small.clear()
            sock.sendall(part)
        if small:
            sock.sendall(small)
        return
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        sent = sock.sendmsg(views[:IOV_MAX])
        while sent:  # drop what went; keep the rest of a part sent in half
            if sent >= len(views[0]):
                sent -= len(views.pop(0))
            else:
                views[0] = views[0][sent:]
                sent = 0


def block_size(block: PushBlock) -> int:
    """Framed bytes of a block, whole or in pieces."""
    return sum(len(p) for p in block) if isinstance(block, tuple) else len(block)


def _closed_by_peer(sock: socket.socket) -> bool:
    """Between requests nothing is due from the service: a readable socket means it closed."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _recv(sock: socket.socket, n: int) -> bytes | memoryview:
    """`n` bytes from the socket. A large answer (chunks, blocks) is received into a buffer of
    Arrow's memory pool, which keeps freed memory for the next one: a reduce after another
    reuses the same pages instead of faulting in fresh ones, and the blocks decoded from it
    are views of it, never copies."""
    if n < 4096:
        buf = bytearray(n)
        _recv_into(sock, memoryview(buf))
        return bytes(buf)
    import pyarrow as pa  # here, not at the top: the service (which never reads) stays small

    view = memoryview(pa.allocate_buffer(n))
    _recv_into(sock, view)
    return view


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionResetError("connection closed by the shuffle service")
        got += k
