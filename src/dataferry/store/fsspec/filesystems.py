"""What an fsspec file system is, as the fsspec store needs to know it: its protocols, whether
its paths are the operating system's (fsspec's and pyarrow's local file systems), and its
exceptions as dataferry's."""

from __future__ import annotations

import os

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from ...errors import StoreError
from ..oserrors import from_os_error


def protocol_of(fs: AbstractFileSystem) -> str:
    """A file system's main protocol name (`fs.protocol` is a name or a tuple of aliases)."""
    protocol = fs.protocol
    return protocol if isinstance(protocol, str) else protocol[0]


def protocols_of(fs: AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def remove_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def is_local_disk(fs: AbstractFileSystem) -> bool:
    """fsspec's LocalFileSystem, or pyarrow's wrapped by fsspec (ArrowFSWrapper): paths are the
    operating system's."""
    if isinstance(fs, LocalFileSystem):
        return True
    inner = getattr(fs, "fs", None)
    return type(inner).__name__ == "LocalFileSystem" and type(inner).__module__.startswith(
        "pyarrow"
    )


def store_error(e: BaseException, what: str, path: str) -> StoreError | None:
    """A file system's exception as dataferry's; None for one that is not an I/O failure
    (a bug, an interrupt), which is left to propagate."""
    msg = f"{what}: {e}"
    if isinstance(e, OSError):
        return from_os_error(e, msg, path)
    if type(e).__module__.startswith("pyarrow"):  # ArrowInvalid and the like
        return StoreError(msg, path)
    return None
