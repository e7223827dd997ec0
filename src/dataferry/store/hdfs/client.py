"""hdfs-native's client for a store: made from an `hdfs://` or `viewfs://` URL and Hadoop
settings, once per process (its Rust runtime does not survive a fork), and its errors as
dataferry's.

hdfs-native raises Python's own OSError kinds for what the NameNode says most often (missing
file: FileNotFoundError, existing file: FileExistsError) and a RuntimeError naming the Java
exception for the rest (`RPCError("org.apache.hadoop.fs.ParentNotDirectoryException", ...)`);
both come out as dataferry's StoreError kinds.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import (
    AccessDenied,
    AlreadyExists,
    ConfigError,
    NotADirectory,
    StoreError,
)
from ...extras import require
from ..oserrors import from_os_error

# the Java exception a NameNode answered with -> dataferry's error
_BY_JAVA = {
    "ParentNotDirectoryException": NotADirectory,
    "FileAlreadyExistsException": AlreadyExists,
    "AccessControlException": AccessDenied,
}
_JAVA = re.compile(r"RPCError\(\"(?:[\w$]+\.)*(\w+)\"")


@dataclass(frozen=True)
class HdfsAddress:
    """Where a store's client connects: `scheme://authority` ("" authority: the default file
    system of the Hadoop configuration), and the Hadoop settings it is made with."""

    scheme: str
    authority: str
    config: Mapping[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str | None:
        return f"{self.scheme}://{self.authority}" if self.authority else None


def split_url(url: str) -> tuple[str, str, str]:
    """(scheme, authority, absolute path) of `hdfs://host:port/a/b` or `viewfs://cluster/a`."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("hdfs", "viewfs"):
        raise ConfigError(f"{url!r} is not an hdfs:// or viewfs:// URL")
    authority, _, path = rest.partition("/")
    return scheme, authority, "/" + path.strip("/")


def hadoop_config(options: Mapping[str, Any], url: str) -> dict[str, str]:
    """Storage options as Hadoop settings (`dfs.client.*`, `fs.defaultFS`, ...), all text."""
    bad = sorted(k for k, v in options.items() if not isinstance(v, str | int | float | bool))
    if bad:
        raise ConfigError(
            f"{url!r}: HDFS storage options are Hadoop settings (name: text), and {bad[0]!r} "
            f"is {type(options[bad[0]]).__name__}"
        )
    return {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}


_CLIENTS: dict[tuple[int, str | None, tuple[tuple[str, str], ...]], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(address: HdfsAddress) -> Any:
    """This process's hdfs-native client for `address` (one per address: it holds the
    NameNode connection and a Rust runtime; a forked child makes its own)."""
    key = (os.getpid(), address.url, tuple(sorted(address.config.items())))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            hdfs_native = require("hdfs_native", f"{address.scheme}:// (HDFS)")
            _reachable(address)
            try:
                client = hdfs_native.Client(address.url, dict(address.config))
            except Exception as e:
                raise StoreError(
                    f"cannot reach {address.url or 'the default HDFS'}: {first_line(e)}"
                ) from e
            _CLIENTS[key] = client
        return client


def _reachable(address: HdfsAddress, timeout_s: float = 10.0) -> None:
    """A NameNode named by host:port answers a TCP connection, or StoreError naming it: hdfs-
    native retries a refused connection without end, so a mistyped URL would hang. A name
    without a port (an HA name service, a viewfs mount table) is left to the client."""
    host, sep, port = address.authority.rpartition(":")
    if address.scheme != "hdfs" or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise StoreError(
            f"cannot reach the NameNode of {address.url}: {e.strerror or e} (is it running, "
            "and is that its RPC port, fs.defaultFS's?)"
        ) from None


def first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def hdfs_error(e: BaseException, what: str, path: str) -> StoreError | None:
    """hdfs-native's exception as dataferry's; None for one that is no I/O failure (a bug)."""
    msg = f"{what}: {first_line(e)}"
    if isinstance(e, OSError):
        return from_os_error(e, msg, path)
    if isinstance(e, RuntimeError):
        java = _JAVA.search(str(e))
        if java:
            msg = f"{what}: {java.group(1)}: {_java_message(str(e))}"
            return _BY_JAVA.get(java.group(1), StoreError)(msg, path)
        return StoreError(msg, path)
    return None


def _java_message(text: str) -> str:
    """The NameNode's message of an RPCError, without its stack."""
    m = re.search(r"\",\s*\"(.*?)(?:\\n|\"\))", text)
    return m.group(1) if m else first_line(Exception(text))
