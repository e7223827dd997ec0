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

import hashlib
import hmac
import json
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..net.limits import ClientCounter
from ..store import Store, paths
from .files import check_app

APPS_DIR = "@apps"  # "@" is not allowed in an application id: no app directory can clash


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


class Registry:
    """The service's side: registered applications (digests of their credentials, kept on
    the store) and the connections each has open."""

    def __init__(self, store: Store, max_apps: int, max_connections: int) -> None:
        self.store = store
        self.max_apps, self.max_connections = max_apps, max_connections
        self._lock = threading.Lock()
        self._digests: dict[str, str] = {}
        self._connections = ClientCounter(max_connections)
        for status in store.list_or_empty(APPS_DIR):
            try:
                record = json.loads(store.read_bytes(status.path))
                self._digests[check_app(record["app"])] = str(record["sha256"])
            except Exception:
                continue  # a record half written by a dead service: that app registers again

    def __repr__(self) -> str:
        return f"Registry({len(self._digests)} applications)"

    def live(self, app: str) -> bool:
        return app in self._digests

    def register(self, app: str) -> str | int:
        """A fresh credential for `app`, or the refusal's status (409 live, 429 too many)."""
        with self._lock:
            if app in self._digests:
                return 409
            if len(self._digests) >= self.max_apps:
                return 429
            secret = secrets.token_hex(32)
            record = json.dumps({"app": app, "sha256": _digest(secret)}).encode()
            self.store.write_bytes(paths.join(APPS_DIR, app), record)
            self._digests[app] = _digest(secret)
            return secret

    def unregister(self, app: str) -> bool:
        with self._lock:
            if self._digests.pop(app, None) is None:
                return False
        self.store.delete(paths.join(APPS_DIR, app))
        return True

    def check(self, app: Any, secret: Any) -> bool:
        """Constant-time check of an application's credential (any JSON values may come)."""
        if not isinstance(app, str) or not isinstance(secret, str):
            return False
        expected = self._digests.get(app)
        given = _digest(secret)
        return hmac.compare_digest(given, expected if expected is not None else "x" * 64) and (
            expected is not None
        )

    def connect(self, app: str) -> bool:
        """Count a connection of `app`; False past its cap (nothing counted)."""
        return self._connections.admit(app)

    def disconnect(self, app: str) -> None:
        self._connections.release(app)
