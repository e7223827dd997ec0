"""Network plumbing shared by the marker and shuffle services: the server on its own thread,
connection limits, TLS, and service processes."""

from .admission import Admission, Slot, this_connection
from .connection import RawConnection, StreamConnection
from .limits import ClientCounter, ConnectionLimits
from .process import ServiceProcess, announce, wait_for_signal
from .server import BackgroundServer, Handler, RawHandler
from .tls import (
    TLSChoice,
    TLSIdentity,
    check_peer,
    client_context,
    connect,
    fingerprint_of,
    is_loopback,
    load_identity,
    require_fingerprint,
    resolve_tls,
    self_signed_identity,
    server_context,
)

__all__ = [
    "Admission",
    "BackgroundServer",
    "ClientCounter",
    "ConnectionLimits",
    "Handler",
    "RawConnection",
    "RawHandler",
    "ServiceProcess",
    "Slot",
    "StreamConnection",
    "TLSChoice",
    "TLSIdentity",
    "announce",
    "check_peer",
    "client_context",
    "connect",
    "fingerprint_of",
    "is_loopback",
    "load_identity",
    "require_fingerprint",
    "resolve_tls",
    "self_signed_identity",
    "server_context",
    "this_connection",
    "wait_for_signal",
]
