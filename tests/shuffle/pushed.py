"""A shuffle pushed to one merge service and finalized, for the tests that read its merge."""

from __future__ import annotations

from collections.abc import Callable

from pyroaring import BitMap

from dataferry.shuffle import (
    MergedPartition,
    PushTarget,
    ShuffleClient,
    push_map_output,
    write_map_output,
)
from dataferry.store import LocalStore


def push_and_finalize(
    node, app: str, shuffle: int, maps: int, payload: Callable[[int], bytes]
) -> tuple[LocalStore, dict[int, list[int]], MergedPartition]:
    """`maps` map outputs of one block each (`payload(m)`) written in the node's directory,
    every block pushed to the node and the one reduce partition finalized: (the map outputs'
    store, each map's offsets, the merge as the driver knows it)."""
    store = LocalStore(node.directory)
    offsets = {m: write_map_output(store, app, shuffle, m, 0, [payload(m)]) for m in range(maps)}
    target = PushTarget(app, shuffle, 0, 1, (node.address,), node.creds)
    for m in range(maps):
        assert push_map_output(store, target, m, 0, offsets[m]).blocks == 1
    (status,) = ShuffleClient(node.address, credentials=node.creds).finalize(app, shuffle, 0)
    assert status.bitmap == BitMap(range(maps))
    return store, offsets, MergedPartition(0, node.address, status.bitmap, status.size)
