"""Fair admission per client address: the cap on connections from one address, and which
connection gives way when a new one arrives at the cap.

A service caps the connections of one address (`ConnectionLimits.max_connections_per_client`)
so that one client cannot take every descriptor. Turning the newcomer away at the cap would
let anyone on a shared host (or behind one NAT address) lock out the legitimate tasks there
with slow connections that never authenticate. So when an address is at its cap, the new
connection is admitted and an older one of the same address is closed instead:

1. a connection that has not authenticated yet, the oldest first (a legitimate client
   authenticates in its first request, within milliseconds; what is still silent is slow);
2. else an authenticated connection idle between requests, the longest idle first (its client
   reconnects when it finds its kept-alive connection closed, as after an idle timeout);
3. else (every connection is serving a request) the newcomer is turned away.

A connection's handler says where it stands through `this_connection()`: `authenticated()`
once the peer has proved itself, `idle()` while waiting for its next request, `busy()` once a
request begins. The server keeps one `Slot` per connection, on the loop's thread.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Callable


class Slot:
    """One admitted connection: its address, when it came, whether it authenticated, and
    whether it is between requests. `close` ends it (the server cancels its task)."""

    __slots__ = ("authed", "client", "close", "idle_since", "order", "serving")

    def __init__(self, client: str, order: int, close: Callable[[], None]) -> None:
        self.client, self.order, self.close = client, order, close
        self.authed = False
        self.serving = True  # an authenticated connection in a request (or just authenticated)
        self.idle_since = order

    def authenticated(self) -> None:
        """The peer proved itself (a token or a credential): no longer closed first."""
        self.authed, self.serving = True, True

    def idle(self) -> None:
        """Waiting for the next request: may be closed to admit another connection."""
        if self.serving:
            self.serving, self.idle_since = False, next(_ORDER)

    def busy(self) -> None:
        """A request has begun: not closed for another connection."""
        self.serving = True


class _NoSlot(Slot):
    """What `this_connection()` gives outside a server's connection (tests, direct calls)."""

    def __init__(self) -> None:
        super().__init__("", 0, lambda: None)


_ORDER = itertools.count(1)  # one clock for arrivals and idle times
_CURRENT: contextvars.ContextVar[Slot | None] = contextvars.ContextVar("connection", default=None)


def this_connection() -> Slot:
    """The slot of the connection the calling task serves (a detached one outside a server)."""
    slot = _CURRENT.get()
    return slot if slot is not None else _NoSlot()


def serve_as(slot: Slot) -> None:
    """Make `slot` the calling task's connection (the server calls it first thing)."""
    _CURRENT.set(slot)


class Admission:
    """Open connections per client address, with the cap and the choice of who gives way."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._open: dict[str, list[Slot]] = {}
        self._lock = threading.Lock()

    def admit(self, client: str, close: Callable[[], None]) -> Slot | None:
        """A slot for a new connection from `client`, closing an older one of the address
        when it is at the cap (see the module); None when none can give way."""
        with self._lock:
            slots = self._open.setdefault(client, [])
            victim = None
            if len(slots) >= self.cap:
                victim = _victim(slots)
                if victim is None:
                    return None
                slots.remove(victim)
            slot = Slot(client, next(_ORDER), close)
            slots.append(slot)
        if victim is not None:
            victim.close()
        return slot

    def release(self, slot: Slot) -> None:
        """The connection ended (a slot already closed to admit another is gone already)."""
        with self._lock:
            slots = self._open.get(slot.client)
            if slots is not None and slot in slots:
                slots.remove(slot)
                if not slots:
                    del self._open[slot.client]

    def total(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._open.values())


def _victim(slots: list[Slot]) -> Slot | None:
    """Who gives way: the oldest unauthenticated connection, else the longest idle one."""
    silent = [s for s in slots if not s.authed]
    if silent:
        return min(silent, key=lambda s: s.order)
    idle = [s for s in slots if not s.serving]
    return min(idle, key=lambda s: s.idle_since) if idle else None
