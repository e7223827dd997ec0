"""Open connections to the mergers, kept between the map outputs a process pushes.

Each map output used to open a connection to each of its mergers and close it after its push:
across hosts that is a TLS handshake (and a HELLO) per map and merger, which cost the pushers
and the services more CPU than the bytes they moved. A process keeps one idle client per
(merger, certificate, application, credential) instead and hands it to the next push to that
merger; a client is never shared by two pushes at once, a client whose request failed is
closed rather than kept, and one that the service closed while idle reconnects by itself
(`ShuffleClient._conn`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from ..stats import IOStatistics
from .client import ShuffleClient
from .per_process import PerProcess
from .tenancy import AppCredentials

MAX_IDLE = 32  # idle clients a process keeps (the oldest is closed past it)

_Key = tuple[str, str, str, str]


class ClientPool:
    """Idle clients by merger and application credential (thread-safe)."""

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self.max_idle = max_idle
        self._idle: OrderedDict[_Key, list[ShuffleClient]] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def client(
        self,
        address: str,
        stats: IOStatistics,
        fingerprint: str = "",
        credentials: AppCredentials | None = None,
    ) -> Iterator[ShuffleClient]:
        """A client of `address` for the application of `credentials` (an idle one when the
        process has one), counting into `stats`; kept for the next push unless the block
        raised."""
        app = credentials.app if credentials is not None else ""
        secret = credentials.secret_for(address) if credentials is not None else ""
        key = (address, fingerprint, app, secret)
        with self._lock:
            idle = self._idle.get(key)
            client = idle.pop() if idle else None
        if client is None:
            client = ShuffleClient(
                address, stats=stats, fingerprint=fingerprint, credentials=credentials
            )
        else:
            stats.incr("push_connections_reused")
        client.stats = stats
        try:
            yield client
        except BaseException:
            client.close()
            raise
        self._keep(key, client)

    def _keep(self, key: _Key, client: ShuffleClient) -> None:
        client.stats = IOStatistics()  # the push's statistics are not written to once it ends
        closing: list[ShuffleClient] = []
        with self._lock:
            self._idle.setdefault(key, []).append(client)
            self._idle.move_to_end(key)
            while sum(len(v) for v in self._idle.values()) > self.max_idle:
                oldest = next(iter(self._idle))
                closing.append(self._idle[oldest].pop(0))
                if not self._idle[oldest]:
                    del self._idle[oldest]
        for c in closing:
            c.close()

    def idle(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())

    def close(self) -> None:
        """Close every idle client."""
        with self._lock:
            clients = [c for v in self._idle.values() for c in v]
            self._idle.clear()
        for c in clients:
            c.close()


_pool = PerProcess(ClientPool)


def process_clients() -> ClientPool:
    """This process's pool (a forked child gets its own)."""
    return _pool.get()
