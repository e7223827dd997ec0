"""A service's side of pushes by reference (`PUSH_REF`): the services on its host whose map
outputs a push may name (its peers, introduced by the holder of the service-wide token), and
the blocks a push names, found in their map output and turned into stubs (`blocks.py`).

A peer's map outputs are read only for the tenant that registered the application there
(application ids are unique per service only): the push carries the application's
credential on that service, checked against that service's own registry record.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from ..errors import NotFound
from ..store import Store, open_store
from .blocks import BlockRef, block_crc, header_matches, ref_stub
from .files import map_output
from .protocol import BadRequest
from .tenancy import registered_with


class Peers:
    """The stores of the other services on this host, by service address."""

    def __init__(self) -> None:
        self._stores: dict[str, Store] = {}
        self._lock = threading.Lock()

    def introduce(self, peers: dict[str, str], own: str) -> int:
        """Learn the directories (absolute local paths) of the services at these addresses;
        how many peers are known."""
        for address, directory in peers.items():
            if not os.path.isabs(directory) or "://" in directory:
                raise BadRequest(
                    400, f"peer {address}: {directory!r} is not an absolute local directory"
                )
        stores = {a: open_store(d) for a, d in peers.items() if a != own}
        with self._lock:
            self._stores.update(stores)
            return len(self._stores)

    def source(self, name: Any, app: str, secret: Any, own: str, own_store: Store) -> Store:
        """The store holding the map outputs of service `name` ("" or `own`: `own_store`);
        a peer's only with `secret`, the application's credential on that service."""
        if not isinstance(name, str):
            raise BadRequest(400, "'from' must be a service address")
        if name in ("", own):
            return own_store
        with self._lock:
            store = self._stores.get(name)
        if store is None:
            raise BadRequest(404, f"service {name}'s map outputs are not known here")
        if not registered_with(store, app, secret):
            raise BadRequest(403, f"not application {app}'s credential at {name}")
        return store


def referenced_blocks(
    store: Store,
    app: str,
    shuffle: int,
    map_index: int,
    attempt: int,
    refs: Sequence[tuple[int, int, int]],
    max_bytes: int,
) -> list[memoryview]:
    """The framed blocks [(reduce, offset, length)] of a map output, mapped from its data file
    (not copied); 404 when the file is missing or shorter, 413 past `max_bytes`."""
    if not refs:
        return []
    start = min(offset for _, offset, _ in refs)
    end = max(offset + length for _, offset, length in refs)
    if end - start > max_bytes:
        raise BadRequest(413, f"a push by reference of {end - start} bytes is too large")
    data_path, _ = map_output(app, shuffle, map_index, attempt)
    try:
        data = store.read_view(data_path, start, end - start)
    except NotFound:
        raise BadRequest(404, f"map output {data_path} not found") from None
    if len(data) != end - start:
        raise BadRequest(404, f"map output {data_path} ends before byte {end}")
    return [data[offset - start : offset - start + length] for _, offset, length in refs]


def stub_for(
    block: memoryview, map_index: int, attempt: int, ref: tuple[int, int, int], holder: str
) -> bytes | None:
    """The stub that merges `block` (reduce, offset, length in the map output of `holder`)
    by reference, or None when the bytes there are not that block."""
    reduce_id, offset, length = ref
    if not header_matches(block, map_index, reduce_id):
        return None
    crc = block_crc(block)
    return ref_stub(BlockRef(map_index, reduce_id, attempt, offset, length, holder, crc))
