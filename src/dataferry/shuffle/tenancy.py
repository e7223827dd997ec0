"""Applications on a shared shuffle service: registration, per-application credentials, quotas.

One service serves many applications (Spark's external shuffle service gives each its own
secret; so does this one). The service-wide token does one thing: it lets a driver REGISTER
an application id. The service answers with a fresh random credential for that application
(`secrets.token_hex`), which the driver hands to its tasks (`AppCredentials`, picklable, one
credential per service address). Every request on the application's data (push, push done,
pushed, finalize, merged reads, map-output fetches, remove, unregister) travels on a
connection that said HELLO with the application id and its credential, and names that
application; the service-wide token alone, or another application's credential, is refused
(403). A second registration of a live application id is refused (409): only UNREGISTER, with
the application's own credential, frees the id (and deletes the application's files).

The service keeps only a SHA-256 digest of each credential, in its directory (`@apps/<app>`,
a name no application id can take), so a restarted service knows its applications again and
a reader of the directory learns no credential.

Leases: a registration lasts while its application uses it. Every request the application
makes (its HELLO, any request on its data, and RENEW, which its driver sends periodically
while a shuffle is open: `LeaseKeeper`) renews it; one idle past `app_lease_s` is expired: it
stops answering to its credential at once, and the service's sweep removes its files and its
registration, freeing the id. `max_apps` counts live applications only, so a holder of the
service-wide token who registers applications until the cap is reached locks others out for
one lease at most. The record keeps the time the application was last seen (wall clock,
rewritten at most every `lease / 10`), so a restarted service judges idleness from it: an
application idle past its lease while the service was down is expired at the first sweep.

Replays: a push for (app, shuffle, merge id, map, reduce) whose block was already received is
answered DUPLICATE and never merged (the partition's bitmap is the record), so replaying a
push, even on the application's own connection, changes nothing; replaying another
application's captured frames on one's own connection is refused (403) before a block is
looked at. Credentials travel like the service token: only over TLS beyond loopback.

Quotas per application (`ShuffleServiceConfig`): merged bytes on disk, open connections, and
merges holding files that are not finalized yet. A push past a quota is answered QUOTA; the
pusher stops pushing to that merger and the reducers read those blocks from the map outputs.
A connection past the cap is refused with 429 at its HELLO.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, StoreError
from ..net.limits import ClientCounter
from ..stats import IOStatistics
from ..store import Store, paths
from .files import check_app

APPS_DIR = "@apps"  # "@" is not allowed in an application id: no app directory can clash
log = logging.getLogger("dataferry.shuffle")
MAX_SWEEP_S = 60.0  # the longest between two sweeps for expired applications


@dataclass(frozen=True)
class AppCredentials:
    """An application's credentials on the shuffle services: one per service address.
    Picklable; the secrets never appear in its repr."""

    app: str
    secrets: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def secret_for(self, address: str) -> str:
        for a, s in self.secrets:
            if a == address:
                return s
        return ""

    def with_secret(self, address: str, secret: str) -> AppCredentials:
        kept = tuple((a, s) for a, s in self.secrets if a != address)
        return AppCredentials(self.app, (*kept, (address, secret)))

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.secrets)


def check_credentials(credentials: Any) -> None:
    """Refuse credentials that are not an application's AppCredentials (None is allowed: no
    credentials, for services without tenancy)."""
    if credentials is not None and not isinstance(credentials, AppCredentials):
        raise ConfigError(
            "credentials must be the application's AppCredentials (from register_app), "
            "not the service-wide token"
        )


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def registered_with(store: Store, app: str, secret: Any) -> bool:
    """Whether `secret` is `app`'s credential in the registry kept on `store` (another service's
    directory on this host): a push by reference from that service's map outputs must come
    from the tenant that registered the id there, not merely one with the same id here."""
    if not isinstance(secret, str) or not secret:
        return False
    try:
        record = json.loads(store.read_bytes(paths.join(APPS_DIR, check_app(app))))
        expected = str(record["sha256"])
    except Exception:
        return False
    return hmac.compare_digest(_digest(secret), expected)


@dataclass
class _App:
    """A registered application: its credential's digest, when it was last seen (monotonic),
    and the last-seen time its record holds (monotonic too: what a restart would see)."""

    digest: str
    seen: float
    saved: float


class Registry:
    """The service's side: registered applications (digests of their credentials and when
    each was last seen, kept on the store), their leases, and the connections each has open."""

    def __init__(
        self,
        store: Store,
        max_apps: int,
        max_connections: int,
        lease_s: float = 3600.0,
        stats: IOStatistics | None = None,
    ) -> None:
        self.store = store
        self.stats = stats if stats is not None else IOStatistics()  # apps_expired
        self.max_apps, self.max_connections, self.lease_s = max_apps, max_connections, lease_s
        self._lock = threading.Lock()
        self._apps: dict[str, _App] = {}
        self._connections = ClientCounter(max_connections)
        now, wall = time.monotonic(), time.time()
        for status in store.list_or_empty(APPS_DIR):
            try:
                record = json.loads(store.read_bytes(status.path))
                app, digest = check_app(record["app"]), str(record["sha256"])
                # a record from before leases were kept: seen now, a full lease from here
                last_seen = float(record.get("last_seen", wall))
            except Exception:
                continue  # a record half written by a dead service: that app registers again
            seen = now - max(0.0, wall - last_seen)  # idle while the service was down, too
            self._apps[app] = _App(digest, seen, seen)

    def __repr__(self) -> str:
        return f"Registry({len(self._apps)} applications)"

    def _live(self, app: str, now: float) -> _App | None:
        entry = self._apps.get(app)
        return entry if entry is not None and now - entry.seen <= self.lease_s else None

    def live(self, app: str) -> bool:
        """Registered, and used within its lease."""
        return self._live(app, time.monotonic()) is not None

    def touch(self, app: str) -> None:
        """The application used the service: its lease starts again (if it is live)."""
        now = time.monotonic()
        with self._lock:
            entry = self._live(app, now)
            if entry is not None:
                entry.seen = now

    def register(self, app: str, remove_files: Callable[[str], object] | None = None) -> str | int:
        """A fresh credential for `app`, or the refusal's status (409 live, 429 too many live),
        refused only after the expired applications are removed (with `remove_files`): they
        hold neither their id nor a place under `max_apps`."""
        got = self._register(app)
        if isinstance(got, int) and remove_files is not None and self.expire(remove_files):
            got = self._register(app)
        return got

    def _register(self, app: str) -> str | int:
        now = time.monotonic()
        with self._lock:
            if app in self._apps:
                return 409
            if sum(1 for a in self._apps if self._live(a, now)) >= self.max_apps:
                return 429
            secret = secrets.token_hex(32)
            self._apps[app] = _App(_digest(secret), now, now)
            self._save(app, self._apps[app], now)
            return secret

    def _save(self, app: str, entry: _App, now: float) -> None:
        """Write the application's record: the credential's digest and when it was last
        seen, in wall-clock seconds (what a restarted service reads)."""
        last_seen = time.time() - (now - entry.seen)
        record = {"app": app, "sha256": entry.digest, "last_seen": round(last_seen, 3)}
        self.store.write_bytes(paths.join(APPS_DIR, app), json.dumps(record).encode())
        entry.saved = entry.seen

    def save_last_seen(self) -> int:
        """Rewrite the records of the applications seen since their record was written more
        than a tenth of the lease ago (so a restart misjudges idleness by no more than that);
        how many were written."""
        now = time.monotonic()
        with self._lock:
            due = [
                (app, e)
                for app, e in self._apps.items()
                if e.seen - e.saved > self.lease_s / 10 and self._live(app, now)
            ]
            for app, entry in due:
                self._save(app, entry, now)
        return len(due)

    def expired(self) -> list[str]:
        """The applications idle past their lease, still registered."""
        now = time.monotonic()
        with self._lock:
            return [app for app in self._apps if self._live(app, now) is None]

    def expire(self, remove_files: Callable[[str], object]) -> list[str]:
        """Remove the applications idle past their lease: their files (`remove_files`), then
        their registration (a crash in between leaves the record: the next sweep finishes);
        the ids removed. An application that cannot be removed now is tried again later."""
        gone = []
        for app in self.expired():
            try:
                remove_files(app)
                if self.forget(app):
                    gone.append(app)
                    self.stats.incr("apps_expired")
                    log.warning(
                        "shuffle service: application %s idle past its lease (%.0f s): "
                        "its files and registration removed",
                        app,
                        self.lease_s,
                    )
            except StoreError as e:
                log.warning("shuffle service: cannot remove expired application %s: %s", app, e)
        return gone

    async def sweep_forever(self, io: Executor, remove_files: Callable[[str], object]) -> None:
        """Every tenth of the lease (at most a minute), on `io`: write recent last-seen times
        (what a restart judges idleness from), then expire."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                await loop.run_in_executor(io, self.save_last_seen)
                await loop.run_in_executor(io, self.expire, remove_files)
            except Exception as e:  # a store failure: the next sweep tries again
                log.warning("shuffle service: lease sweep failed: %r", e)
            await asyncio.sleep(min(self.lease_s / 10, MAX_SWEEP_S))

    def forget(self, app: str) -> bool:
        """Remove an expired application's registration (after its files)."""
        with self._lock:
            if app not in self._apps or self._live(app, time.monotonic()) is not None:
                return False
            del self._apps[app]
        self.store.delete(paths.join(APPS_DIR, app))
        return True

    def unregister(self, app: str) -> bool:
        with self._lock:
            if self._apps.pop(app, None) is None:
                return False
        self.store.delete(paths.join(APPS_DIR, app))
        return True

    def check(self, app: Any, secret: Any) -> bool:
        """Constant-time check of an application's credential (any JSON values may come); an
        application past its lease no longer answers to it."""
        if not isinstance(app, str) or not isinstance(secret, str):
            return False
        entry = self._live(app, time.monotonic())
        expected = entry.digest if entry is not None else None
        given = _digest(secret)
        return hmac.compare_digest(given, expected if expected is not None else "x" * 64) and (
            expected is not None
        )

    def connect(self, app: str) -> bool:
        """Count a connection of `app`; False past its cap (nothing counted)."""
        return self._connections.admit(app)

    def disconnect(self, app: str) -> None:
        self._connections.release(app)
