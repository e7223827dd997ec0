"""The driver's side of registration leases: keep its applications registered while their
shuffles are open.

A shuffle service expires an application that makes no request for its lease
(`ShuffleServiceConfig.app_lease_s`), removing its files. A shuffle can sit idle longer than
that and still be wanted (planned and computed later, or its map outputs kept for a reduce
that runs again), so the driver that registered it sends RENEW to each of its services every
third of the shortest lease they answer with, on a background thread, until it lets go
(`drop`, `stop`). A service that does not answer is tried again at the next round.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from ..errors import ShuffleError
from .client import ShuffleClient
from .tenancy import AppCredentials

log = logging.getLogger("dataferry.shuffle")

FIRST_WAIT_S = 60.0  # before a service has answered with its lease
MIN_WAIT_S = 0.05


class LeaseKeeper:
    """Renews the registrations of the applications it keeps (start() / stop(), or `with`)."""

    def __init__(
        self, fingerprint: str = "", insecure: bool = False, timeout: float = 10.0
    ) -> None:
        self.fingerprint, self.insecure, self.timeout = fingerprint, insecure, timeout
        self._apps: dict[str, AppCredentials] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.wait_s = FIRST_WAIT_S
        self.renewals = 0

    def __repr__(self) -> str:
        return f"LeaseKeeper({sorted(self._apps)})"  # never a credential

    def keep(self, credentials: AppCredentials) -> AppCredentials:
        """Renew this application's registrations from now on (at once, then periodically);
        the credentials, for the caller to hand on."""
        with self._lock:
            self._apps[credentials.app] = credentials
        self.renew_once()
        self._wake.set()  # the thread waits the lease just learned, not the first guess
        return credentials

    def drop(self, app: str) -> None:
        """Stop renewing an application (unregistered, or its shuffles are done)."""
        with self._lock:
            self._apps.pop(app, None)

    def renew_once(self) -> None:
        """Renew every kept application on every service; the next wait follows the shortest
        lease answered."""
        with self._lock:
            kept = list(self._apps.values())
        leases = []
        for creds in kept:
            for address in creds.addresses:
                try:
                    with ShuffleClient(
                        address,
                        credentials=creds,
                        timeout=self.timeout,
                        fingerprint=self.fingerprint,
                        insecure=self.insecure,
                    ) as client:
                        leases.append(client.renew(creds.app))
                    self.renewals += 1
                except ShuffleError as e:  # down, restarting, or the app is gone: next round
                    log.debug("cannot renew %s on %s: %s", creds.app, address, e)
        if leases:
            self.wait_s = max(MIN_WAIT_S, min(leases) / 3)

    def start(self) -> LeaseKeeper:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="shuffle-lease-keeper", daemon=True
            )
            self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self._wake.wait(self.wait_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.renew_once()
            except Exception as e:  # never end the keeper: the leases depend on it
                log.warning("shuffle lease renewal failed: %r", e)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(self.timeout + 5)
            self._thread = None

    def __enter__(self) -> LeaseKeeper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_OWNED: weakref.WeakKeyDictionary[Any, LeaseKeeper] = weakref.WeakKeyDictionary()
_OWNED_LOCK = threading.Lock()


def keeper_of(owner: Any, fingerprint: str = "") -> LeaseKeeper:
    """The running keeper of `owner` (a Dask client: the driver of its shuffles), made on
    first use and stopped when the owner is collected."""
    with _OWNED_LOCK:
        keeper = _OWNED.get(owner)
        if keeper is None:
            keeper = _OWNED[owner] = LeaseKeeper(fingerprint).start()
            weakref.finalize(owner, keeper.stop)
        return keeper
