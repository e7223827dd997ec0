"""TLS settings and service addresses are checked where they are given, in one spelling."""

from __future__ import annotations

import hashlib

import pytest

from dataferry.errors import ConfigError
from dataferry.markers import MarkerClient
from dataferry.net import check_peer
from dataferry.net.addresses import parse_service_address, parse_service_url
from dataferry.net.tls import normalize_fingerprint
from dataferry.shuffle.client import ShuffleClient

DER = b"not really a certificate"
HEX = hashlib.sha256(DER).hexdigest()
OPENSSL = ":".join(HEX[i : i + 2] for i in range(0, 64, 2)).upper()  # as openssl prints it


class _Peer:
    def getpeercert(self, binary_form: bool = False) -> bytes:
        return DER


@pytest.mark.parametrize(
    "spelling",
    [HEX, HEX.upper(), OPENSSL, f"  {OPENSSL.lower()}\n", f"SHA256 Fingerprint={OPENSSL}"],
)
def test_a_fingerprint_in_any_usual_spelling_pins_the_same_certificate(spelling):
    assert normalize_fingerprint(spelling) == HEX
    check_peer(_Peer(), spelling, "service 10.0.0.5:7337")  # no mismatch


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (HEX[:-2], "62 hex digits"),
        (OPENSSL + ":00", "66 hex digits"),
        (HEX[:-1] + "g", "not hex digits"),
        (hashlib.sha1(DER).hexdigest(), "40 hex digits"),
    ],
)
def test_anything_else_is_refused_naming_the_option_and_value(value, words):
    with pytest.raises(ConfigError, match=words) as e:
        normalize_fingerprint(value, "service_fingerprint")
    assert "service_fingerprint" in str(e.value) and value in str(e.value)
    with pytest.raises(ConfigError, match=words):
        ShuffleClient("127.0.0.1:7337", fingerprint=value)


def test_clients_keep_the_normal_spelling():
    client = MarkerClient("https://10.0.0.5:7338", fingerprint=OPENSSL)
    assert client.fingerprint == HEX
    assert ShuffleClient("[::1]:7337", fingerprint=OPENSSL).fingerprint == HEX


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://127.0.0.1:1", "must be http"),
        ("127.0.0.1:7338", "must be http"),
        ("http://127.0.0.1:70000", "port must be a number"),
        ("http://bad_host!:1", "neither an IP address nor a host name"),
        ("http://127.0.0.1:1/markers", "path"),
        ("https://127.0.0.1:7338", "uses https, but no TLS certificate fingerprint"),
        ("http://10.0.0.5:7338", "clear text"),
    ],
)
def test_service_urls_are_refused_with_the_url_named(url, words):
    with pytest.raises(ConfigError, match=words) as e:
        parse_service_url(url, what="marker service")
    assert url in str(e.value)


def test_service_urls_and_addresses_that_work():
    assert parse_service_url("http://localhost:7338") == ("http", "localhost", 7338)
    assert parse_service_url("https://[::1]", fingerprint=HEX) == ("https", "::1", 443)
    assert parse_service_url("http://10.0.0.5:1", insecure=True)[1] == "10.0.0.5"
    assert parse_service_address("node-3.example:7337") == ("node-3.example", 7337)
    for bad in ("node-3", "node:0", "tcp://node:1", "::1:7337"):
        with pytest.raises(ConfigError, match="shuffle service address"):
            parse_service_address(bad, "shuffle service")
