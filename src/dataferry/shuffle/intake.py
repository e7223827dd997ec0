"""How a shuffle service takes pushed blocks: as bytes (`PUSH`) or by reference (`PUSH_REF`,
found in a map output on its host, see `by_reference.py`), each block's header checked, then
handed to the merge state machine (`merge.py`); the answer is one code per block, once the
blocks waiting behind another writer of their partition are written."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..stats import IOStatistics
from ..store import Store
from .blocks import header_matches
from .by_reference import Peers, referenced_blocks, stub_for
from .config import ShuffleServiceConfig
from .merge import MergeManager, PushCode
from .protocol import BadRequest, blocks_of, ids_of, int_of, refs_of


class PushIntake:
    """A service's pushes: its store, merges and peers, run on its I/O threads."""

    def __init__(
        self,
        store: Store,
        merges: MergeManager,
        config: ShuffleServiceConfig,
        stats: IOStatistics,
        io: ThreadPoolExecutor,
        address: Callable[[], str],
    ) -> None:
        self.store, self.merges, self.config, self.stats = store, merges, config, stats
        self.io, self.address = io, address
        self.peers = Peers()  # the services on this host whose map outputs a push may name

    async def push(self, header: dict[str, Any], payload: memoryview) -> list[int]:
        app, shuffle, merge_id = ids_of(header)
        blocks = blocks_of(header)
        if sum(b[2] for b in blocks) != len(payload):
            raise BadRequest(400, "push block lengths do not add up to the payload")
        results = await asyncio.get_running_loop().run_in_executor(
            self.io, self._push_blocks, app, shuffle, merge_id, blocks, payload
        )
        return await self._codes(results)

    async def push_ref(self, header: dict[str, Any]) -> list[int]:
        results = await asyncio.get_running_loop().run_in_executor(
            self.io, self._push_from_file, header
        )
        return await self._codes(results)

    async def _codes(self, results: list[PushCode | Future]) -> list[int]:
        """The codes of a push's blocks, once every block waiting behind a writer is done."""
        codes: list[int] = []
        for r in results:
            code = await asyncio.wrap_future(r) if isinstance(r, Future) else r
            codes.append(int(code))
        return codes

    def _push_from_file(self, header: dict[str, Any]) -> list[PushCode | Future]:
        """A push by reference: the blocks are found in the map output they name, on this
        service's directory or a peer's on the same host, their headers checked, and merged
        as stubs naming where they lie (or, without `merge_by_reference`, as their bytes);
        nothing crossed a socket."""
        app, shuffle, merge_id = ids_of(header)
        map_index, attempt = int_of(header, "map"), int_of(header, "attempt")
        refs, holder = refs_of(header), header.get("from", "")
        try:
            store = self.peers.source(holder, app, header.get("secret"), self.address(), self.store)
        except BadRequest as e:
            self.stats.incr("requests_forbidden" if e.status == 403 else "push_ref_unknown")
            raise
        limit = self.config.max_frame_bytes
        views = referenced_blocks(store, app, shuffle, map_index, attempt, refs, limit)
        self.stats.incr("push_ref_bytes", sum(length for _, _, length in refs))
        if not self.config.merge_by_reference:
            blocks = [(map_index, r, length) for r, _, length in refs]
            return self._push_views(app, shuffle, merge_id, blocks, views)
        results: list[PushCode | Future] = []
        for ref, block in zip(refs, views, strict=True):
            stub = stub_for(block, map_index, attempt, ref, holder or self.address())
            if stub is None:
                self.merges.stats.incr("push_corrupt")
                results.append(PushCode.CORRUPT)
                continue
            results.append(self.merges.push(app, shuffle, merge_id, map_index, ref[0], stub))
        return results

    def _push_blocks(
        self, app: str, shuffle: int, merge_id: int, blocks: list[Any], payload: memoryview
    ) -> list[PushCode | Future]:
        views = []
        pos = 0
        for _, _, length in blocks:
            views.append(payload[pos : pos + int(length)])
            pos += int(length)
        return self._push_views(app, shuffle, merge_id, blocks, views)

    def _push_views(
        self,
        app: str,
        shuffle: int,
        merge_id: int,
        blocks: list[Any],
        views: list[memoryview],
    ) -> list[PushCode | Future]:
        results: list[PushCode | Future] = []
        for (map_index, reduce_id, _), block in zip(blocks, views, strict=True):
            if not header_matches(block, int(map_index), int(reduce_id)):
                self.merges.stats.incr("push_corrupt")
                results.append(PushCode.CORRUPT)
                continue
            results.append(
                self.merges.push(app, shuffle, merge_id, int(map_index), int(reduce_id), block)
            )
        return results
