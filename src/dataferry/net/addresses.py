"""Which address a host is reached at: what a service binds to and what it tells others.

A service bound to one address advertises that address. A service bound to every interface
(`0.0.0.0` or `::`) advertises the address of the interface that routes to a given peer, or
else the host's primary non-loopback address: "0.0.0.0" is no place a client can connect to.
Finding the routing interface sends nothing: connecting a UDP socket only picks a route.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
from collections.abc import Iterable

from ..errors import ConfigError
from .tls import is_loopback

WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})
# a routable address that is never contacted: connecting a UDP socket to it only asks the
# kernel which interface and source address it would use
_PROBE_V4 = "10.255.255.254"
_PROBE_V6 = "fd00:ffff::1"
_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address
_HOSTNAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")


def is_wildcard(host: str) -> bool:
    """True for the bind-everything addresses (`0.0.0.0`, `::`, empty)."""
    return host.strip() in WILDCARDS


def validate_host(value: str) -> str:
    """A `--host` value as a bind address (an IP address, `0.0.0.0`/`::`, or a host name
    that resolves here), or a ConfigError that says what is wrong with it."""
    host = value.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host in ("0.0.0.0", "::"):
        return host
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not host:
        raise ConfigError("--host is empty: give an address such as 127.0.0.1 or 0.0.0.0")
    if host.count(":") == 1 or "://" in host:
        raise ConfigError(
            f"--host {value!r} looks like an address with a port or a URL: give the host "
            "alone (for example 10.0.0.5) and the port with --port"
        )
    if not _HOSTNAME.fullmatch(host):
        raise ConfigError(f"--host {value!r} is neither an IP address nor a host name")
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ConfigError(f"--host {value!r} does not resolve on this machine: {e}") from None
    return host


def route_address(peer: str) -> str:
    """The local address of the interface this host uses to reach `peer` (an address or a
    resolvable name); nothing is sent."""
    family = socket.AF_INET6 if ":" in peer.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((peer.strip("[]"), 9))
        return s.getsockname()[0]


def primary_address() -> str:
    """The host's main non-loopback address: the source of its default route (IPv4, then
    IPv6), else the first interface's IPv4 address (a host with no default route, such as a
    cluster on a private network), else one its host name resolves to, else 127.0.0.1."""
    for probe in (_PROBE_V4, _PROBE_V6):
        try:
            found = route_address(probe)
        except OSError:
            continue
        if not is_loopback(found) and not is_wildcard(found):
            return found
    for found in interface_addresses():
        if not is_loopback(found):
            return found
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        infos = []
    for info in infos:
        found = str(info[4][0])
        if not is_loopback(found):
            return found
    return "127.0.0.1"


def interface_addresses() -> list[str]:
    """The IPv4 address of each network interface that has one (Linux; elsewhere none)."""
    try:
        import fcntl
    except ImportError:
        return []
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                answer = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, request)
            except OSError:
                continue  # no IPv4 address, or the interface is gone
            found.append(socket.inet_ntoa(answer[20:24]))
    return found


def advertised_host(bind_host: str, peer: str = "") -> str:
    """What others should connect to for a service bound to `bind_host`: the bind address
    itself, or for a wildcard bind the address that routes to `peer` (the primary
    non-loopback address when no peer is known)."""
    if not is_wildcard(bind_host):
        return bind_host.strip("[]")
    if peer:
        try:
            return route_address(peer)
        except OSError:
            pass
    return primary_address()


def host_of(address: str) -> str:
    """The host part of `tcp://host:port`, `host:port`, `[v6]:port` or a bare host."""
    rest = address.split("://", 1)[-1].split("/", 1)[0]
    if rest.startswith("["):
        return rest[1 : rest.index("]")]
    if rest.count(":") == 1:
        return rest.rsplit(":", 1)[0]
    return rest


def join_host_port(host: str, port: int) -> str:
    """`host:port`, with an IPv6 address in brackets."""
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def this_machine(host: str) -> bool:
    """True when `host` is an address of this machine (loopback or one of its interfaces)."""
    return is_loopback(host) or host in interface_addresses() or host == primary_address()


def check_reachable(address: str, client_hosts: Iterable[str], what: str = "service") -> None:
    """Refuse a service address that clients on `client_hosts` cannot connect to: a
    wildcard (`0.0.0.0`), or loopback while some clients run on other machines."""
    host = host_of(address)
    if is_wildcard(host):
        raise ConfigError(
            f"{what} {address}: {host or 'an empty host'} is where a service binds, not an "
            "address to connect to; give the address of the host it runs on"
        )
    if not is_loopback(host):
        return
    elsewhere = sorted({h for h in client_hosts if not this_machine(h)})
    if elsewhere:
        raise ConfigError(
            f"{what} {address} is on loopback, but tasks run on other hosts "
            f"({', '.join(elsewhere[:3])}): start it with --host set to an address they reach"
        )
