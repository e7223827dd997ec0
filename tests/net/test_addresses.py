"""Which address a service binds to and advertises, and how `--host` values are checked."""

from __future__ import annotations

import ipaddress

import pytest

from dataferry.errors import ConfigError
from dataferry.net.addresses import (
    advertised_host,
    check_reachable,
    host_of,
    is_wildcard,
    join_host_port,
    primary_address,
    route_address,
    validate_host,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        (" 10.0.0.5 ", "10.0.0.5"),
        ("[::1]", "::1"),
        ("0.0.0.0", "0.0.0.0"),
        ("::", "::"),
        ("localhost", "localhost"),
    ],
)
def test_valid_hosts(value, expected):
    assert validate_host(value) == expected


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("10.0.0.5:7337", "--port"),
        ("http://10.0.0.5", "URL"),
        ("", "empty"),
        ("two words", "neither an IP address nor a host name"),
        ("bad_name!", "neither an IP address nor a host name"),
        ("no-such-host.invalid", "does not resolve"),
    ],
)
def test_invalid_hosts_say_what_is_wrong(value, words):
    with pytest.raises(ConfigError, match=words):
        validate_host(value)


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("tcp://10.1.2.3:8786", "10.1.2.3"),
        ("10.1.2.3:7337", "10.1.2.3"),
        ("https://10.1.2.3:443/v1/health", "10.1.2.3"),
        ("[fd00::5]:7337", "fd00::5"),
        ("tls://[fd00::5]:1", "fd00::5"),
        ("fd00::5", "fd00::5"),
        ("node-7", "node-7"),
    ],
)
def test_host_of(address, host):
    assert host_of(address) == host


def test_join_host_port_brackets_ipv6():
    assert join_host_port("10.0.0.1", 80) == "10.0.0.1:80"
    assert join_host_port("fd00::5", 80) == "[fd00::5]:80"
    assert host_of(join_host_port("fd00::5", 80)) == "fd00::5"


def test_a_concrete_bind_address_is_advertised_as_it_is():
    assert advertised_host("10.9.8.7", "127.0.0.1") == "10.9.8.7"
    assert advertised_host("[::1]") == "::1"


def test_a_wildcard_bind_advertises_the_interface_that_reaches_the_peer():
    assert is_wildcard("0.0.0.0") and is_wildcard("::") and not is_wildcard("10.0.0.1")
    assert route_address("127.0.0.1") == "127.0.0.1"
    assert advertised_host("0.0.0.0", "127.0.0.1") == "127.0.0.1"


def test_a_wildcard_bind_without_a_peer_advertises_a_real_address():
    found = advertised_host("0.0.0.0")
    assert found == primary_address()
    address = ipaddress.ip_address(found)
    assert not address.is_unspecified  # never "0.0.0.0": no client can connect there


def test_a_service_on_loopback_is_refused_for_tasks_on_other_hosts():
    with pytest.raises(ConfigError, match=r"on loopback.*10\.200\.0\.9.*--host"):
        check_reachable("http://127.0.0.1:7340", ["127.0.0.1", "10.200.0.9"], "marker service")


def test_a_service_on_loopback_is_fine_for_tasks_on_this_machine():
    check_reachable("http://127.0.0.1:7340", ["127.0.0.1", primary_address()])
    check_reachable("https://10.200.0.9:7340", ["10.1.1.1", "10.1.1.2"])  # not loopback


@pytest.mark.parametrize("url", ["https://0.0.0.0:7340", "[::]:7337"])
def test_a_wildcard_is_no_address_to_connect_to(url):
    with pytest.raises(ConfigError, match="not an address to connect to"):
        check_reachable(url, ["127.0.0.1"])
