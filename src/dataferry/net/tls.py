"""TLS for the services: one certificate and key per job, trusted by fingerprint.

A job's services may share one self-signed identity; its SHA-256 fingerprint travels to the
tasks with the token. Clients do not check a certificate chain or a host name: they pin the
peer certificate to that fingerprint after the handshake, so only a service holding the job's
key is ever sent the token. TLS is on by default whenever a service binds beyond loopback.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import re
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError, DataferryError
from ..extras import require


@dataclass(frozen=True)
class TLSIdentity:
    """A certificate and its key (PEM), and the certificate's SHA-256 fingerprint (hex of DER)."""

    cert_pem: bytes
    key_pem: bytes
    fingerprint: str

    def __repr__(self) -> str:  # never print the key
        return f"TLSIdentity(fingerprint={self.fingerprint!r})"


TLSChoice = TLSIdentity | None | Literal["auto"]


def fingerprint_of(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


_HEX64 = re.compile(r"[0-9a-f]{64}")
_PAIRS = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){31}")
# what `openssl x509 -noout -fingerprint -sha256` prints before the digits
_OPENSSL_PREFIX = re.compile(r"sha-?256\s+fingerprint\s*=\s*", re.IGNORECASE)


def normalize_fingerprint(value: object, option: str = "fingerprint") -> str:
    """The one spelling of a certificate fingerprint: 64 lower-case hex digits (SHA-256 of the
    DER certificate), or "" for none.

    Accepted: the hex digits in any case, bare or in colon-separated pairs as
    `openssl x509 -fingerprint -sha256` prints them (its `SHA256 Fingerprint=` prefix too),
    with spaces around. Anything else (another length, a non-hex digit, another digest) is a
    ConfigError naming `option` and the value."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(
            f"{option} must be a string of hex digits, got {value!r} ({type(value).__name__})"
        )
    text = _OPENSSL_PREFIX.sub("", value.strip(), count=1).strip().lower()
    if not text:
        return ""
    if _HEX64.fullmatch(text):
        return text
    if _PAIRS.fullmatch(text):
        return text.replace(":", "")
    digits = text.replace(":", "")
    why = (
        f"{len(digits)} hex digits (a SHA-256 fingerprint has 64)"
        if re.fullmatch(r"[0-9a-f]*", digits)
        else "not hex digits"
    )
    raise ConfigError(
        f"{option} {value!r} is not a SHA-256 certificate fingerprint: {why}; give 64 hex "
        "digits, with or without colons (as `openssl x509 -noout -fingerprint -sha256` prints)"
    )


def _identity(cert_pem: bytes, key_pem: bytes) -> TLSIdentity:
    der = ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii"))
    return TLSIdentity(cert_pem, key_pem, fingerprint_of(der))


def self_signed_identity(hosts: Sequence[str] = ()) -> TLSIdentity:
    """A fresh self-signed pair (P-256) naming `hosts` (names or IP addresses) in its SAN."""
    require("cryptography", "TLS for the services")  # names the extra when it is missing
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dataferry job service")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return _identity(cert.public_bytes(serialization.Encoding.PEM), key_pem)


def load_identity(certfile: str, keyfile: str) -> TLSIdentity:
    """An identity from PEM files (an operator's own certificate, or one a driver wrote)."""
    try:
        with open(certfile, "rb") as f:
            cert_pem = f.read()
        with open(keyfile, "rb") as f:
            key_pem = f.read()
        identity = _identity(cert_pem, key_pem)
        server_context(identity)  # the key must match the certificate
    except (OSError, ValueError, ssl.SSLError) as e:
        raise DataferryError(f"cannot load TLS certificate {certfile} / key {keyfile}: {e}") from e
    return identity


def server_context(identity: TLSIdentity) -> ssl.SSLContext:
    """A server-side context (TLS 1.2 or later) presenting `identity`."""
    import os
    import tempfile

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # the ssl module loads a chain only from files: a private directory, removed at once
    with tempfile.TemporaryDirectory(prefix="dataferry-tls-") as folder:
        cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        for path, data in ((cert, identity.cert_pem), (key, identity.key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(cert, key)
    return ctx


def client_context(fingerprint: str) -> ssl.SSLContext:
    """A client-side context for a service pinned by `fingerprint`: no chain or host name
    checks (the certificate is self-signed); call `check_peer` after the handshake."""
    if not normalize_fingerprint(fingerprint):
        raise DataferryError("a TLS client needs the service's certificate fingerprint")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def check_peer(sock: ssl.SSLSocket | ssl.SSLObject, fingerprint: str, address: str) -> None:
    """Refuse a peer whose certificate is not the pinned one (before anything is sent)."""
    fingerprint = normalize_fingerprint(fingerprint)
    der = sock.getpeercert(binary_form=True)
    got = fingerprint_of(der) if der else ""
    if not fingerprint or not hmac.compare_digest(got, fingerprint):
        raise DataferryError(
            f"{address} presented certificate {got[:16] or 'none'}..., not the job's "
            f"{fingerprint[:16]}...: refusing to send it the token"
        )


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and "localhost" (what never leaves the machine)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_tls(host: str, tls: TLSChoice) -> TLSIdentity | None:
    """The rule: "auto" means TLS (a fresh self-signed identity) beyond loopback, plain on it."""
    if tls == "auto":
        return None if is_loopback(host) else self_signed_identity([host])
    if tls is None or isinstance(tls, TLSIdentity):
        return tls
    raise DataferryError(f"tls must be a TLSIdentity, None or 'auto', not {tls!r}")


def require_fingerprint(host: str, fingerprint: str, insecure: bool, what: str) -> None:
    """A client never sends the token in clear text off loopback (unless told `insecure`);
    `what` names the service and its address in the error."""
    if not fingerprint and not insecure and not is_loopback(host):
        raise DataferryError(
            f"{what} is not on loopback and no TLS fingerprint was given: refusing "
            "to send the token in clear text (pass the service's fingerprint, or insecure=True)"
        )


def connect(
    host: str,
    port: int,
    timeout: float,
    fingerprint: str = "",
    insecure: bool = False,
    what: str = "service",
) -> socket.socket:
    """A client socket to a service: TLS pinned to `fingerprint` when one is given, plain
    otherwise (and then only on loopback, unless `insecure`). OSError when unreachable."""
    address = f"{host}:{port}"
    fingerprint = normalize_fingerprint(fingerprint)
    require_fingerprint(host, fingerprint, insecure, f"{what} {address}")
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if not fingerprint:
        return sock
    try:
        tls_sock = client_context(fingerprint).wrap_socket(sock, server_hostname=None)
    except ssl.SSLError as e:
        sock.close()
        raise DataferryError(f"{what} {address}: TLS handshake failed ({e.reason or e})") from None
    except BaseException:
        sock.close()
        raise
    try:
        check_peer(tls_sock, fingerprint, f"{what} {address}")
    except BaseException:
        tls_sock.close()
        raise
    return tls_sock
