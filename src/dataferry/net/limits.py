"""Limits every service connection lives under: timeouts, a cap per client address, and the
largest thing read before the peer has authenticated."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..errors import ConfigError


@dataclass(frozen=True)
class ConnectionLimits:
    """
    idle_timeout_s: an authenticated connection that sends no request this long is closed
        (clients reconnect when they find their kept-alive connection closed).
    read_timeout_s: a request, once begun, must arrive whole within this long; a connection
        must authenticate (and finish its TLS handshake) within it too.
    max_connections_per_client: connections from one client address at a time, so one
        client cannot take every descriptor of the service. A new connection at the cap is
        let in by closing one of the address's connections that has not authenticated (the
        oldest), else one idle between requests (the longest idle); it is closed at once only
        when all of them are serving requests (`admission.py`).
    max_unauthenticated_bytes: the most a connection may send before it has authenticated
        (a request head carrying the token); nothing larger is allocated for it before then.
    """

    idle_timeout_s: float = 300.0
    read_timeout_s: float = 30.0
    max_connections_per_client: int = 512
    max_unauthenticated_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        if min(self.idle_timeout_s, self.read_timeout_s) <= 0:
            raise ConfigError("idle_timeout_s and read_timeout_s must be > 0")
        if self.max_connections_per_client < 1 or self.max_unauthenticated_bytes < 512:
            raise ConfigError(
                "max_connections_per_client must be >= 1, max_unauthenticated_bytes >= 512"
            )


class ClientCounter:
    """Open connections per client (an address; for the shuffle service's tenancy, an
    application), with the cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def admit(self, client: str) -> bool:
        with self._lock:
            n = self._open.get(client, 0)
            if n >= self.cap:
                return False
            self._open[client] = n + 1
            return True

    def release(self, client: str) -> None:
        with self._lock:
            n = self._open.get(client, 0) - 1
            if n > 0:
                self._open[client] = n
            else:
                self._open.pop(client, None)

    def total(self) -> int:
        with self._lock:
            return sum(self._open.values())
