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


def _check_host(host: str, value: str, what: str) -> str:
    """A host to connect to, as written in `value`: an IP address or a host name (not
    resolved here: a name the driver cannot resolve may still resolve on the workers)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if not bare or not _HOSTNAME.fullmatch(bare):
        raise ConfigError(f"{what} {value!r}: {bare!r} is neither an IP address nor a host name")
    return bare


def _check_port(port: str, value: str, what: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{what} {value!r}: the port must be a number from 1 to 65535")
    return int(port)


def _split_netloc(netloc: str, value: object, what: str) -> tuple[str, str | None]:
    """(host, port or None) of `host`, `host:port`, `[v6]` or `[v6]:port`."""
    if netloc.startswith("["):
        end = netloc.find("]")
        rest = netloc[end + 1 :] if end > 0 else "?"
        if rest and not rest.startswith(":"):
            raise ConfigError(f"{what} {value!r}: an IPv6 address goes in brackets, [v6]:port")
        return netloc[: end + 1], rest[1:] if rest else None
    if netloc.count(":") > 1:
        raise ConfigError(f"{what} {value!r}: an IPv6 address goes in brackets, [v6]:port")
    host, colon, port = netloc.partition(":")
    return host, port if colon else None


def require_tls(
    host: str,
    fingerprint: str,
    insecure: bool,
    *,
    what: str,
    value: str,
    https: bool = False,
    fingerprint_option: str = "fingerprint",
) -> None:
    """Refuse on the driver what every client would refuse: TLS (https) with no fingerprint
    to pin the certificate to (clients check no chain), and clear text off loopback."""
    if https and not fingerprint:
        raise ConfigError(
            f"{what} {value} uses https, but no TLS certificate fingerprint was given "
            f"({fingerprint_option}): clients trust a service's certificate only by its "
            "SHA-256 fingerprint (printed when the service starts)"
        )
    if not fingerprint and not insecure and not is_loopback(host):
        raise ConfigError(
            f"{what} {value} is not on loopback and no TLS certificate fingerprint was given "
            f"({fingerprint_option}): the token would travel in clear text; serve it with TLS "
            "and pass its fingerprint"
        )


def parse_service_url(
    url: object,
    *,
    fingerprint: str = "",
    insecure: bool = False,
    what: str = "service",
    fingerprint_option: str = "fingerprint",
) -> tuple[str, str, int]:
    """(scheme, host, port) of an HTTP service URL (`http://host:port` or `https://...`,
    port 80 or 443 by default), or one ConfigError naming the URL: a wrong scheme, host or
    port, a path (requests go to the service's root), https without a fingerprint, or clear
    text off loopback without `insecure`. `fingerprint` is already normalized."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{what} URL must be http(s)://host:port, got {url!r}")
    value = url.strip()
    try:
        parts = urlsplit(value)
    except ValueError as e:
        raise ConfigError(f"{what} URL {url!r} is not a URL: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{what} URL must be http(s)://host:port, got {url!r}")
    if "@" in parts.netloc:
        raise ConfigError(
            f"{what} URL {url!r} has a user name: the service's token is given apart from it"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(
            f"{what} URL {url!r} has a path or query: give the service's root, http(s)://host:port"
        )
    host_text, port_text = _split_netloc(parts.netloc, url, f"{what} URL")
    host = _check_host(host_text, url, f"{what} URL")
    default = 443 if scheme == "https" else 80
    port = _check_port(port_text, url, f"{what} URL") if port_text is not None else default
    require_tls(
        host,
        fingerprint,
        insecure,
        what=what,
        value=value,
        https=scheme == "https",
        fingerprint_option=fingerprint_option,
    )
    return scheme, host, port


def parse_service_address(address: object, what: str = "service") -> tuple[str, int]:
    """(host, port) of a `host:port` service address (`[v6]:port` for IPv6), or one
    ConfigError naming it."""
    if not isinstance(address, str) or not address.strip():
        raise ConfigError(f"{what} address must be host:port, got {address!r}")
    if "://" in address or "/" in address:
        raise ConfigError(f"{what} address must be host:port (not a URL), got {address!r}")
    host, port = _split_netloc(address.strip(), address, f"{what} address")
    if port is None:
        raise ConfigError(
            f"{what} address must be host:port ([address]:port for IPv6), got {address!r}"
        )
    return (
        _check_host(host, address, f"{what} address"),
        _check_port(port, address, f"{what} address"),
    )
