"""What the shuffle service reads to answer: byte ranges of map outputs and merged partitions,
found through their index files (the last 4096 kept decoded, least recently used dropped)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ..store import Store
from .files import decode_offsets, map_output
from .mapoutput import block_range
from .merge import MergeManager
from .protocol import BadRequest, app_of, ids_of, int_of

MAX_CACHED_INDEXES = 4096


class ServedRanges:
    """The files and byte ranges a request names, checked against the store (on I/O threads)."""

    def __init__(self, store: Store, merges: MergeManager) -> None:
        self.store, self.merges = store, merges
        self._index_cache: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def forget(self, prefix: str) -> None:
        """Drop the cached indexes under `prefix` (their files were removed)."""
        with self._lock:
            for key in [k for k in self._index_cache if k.startswith(prefix)]:
                del self._index_cache[key]

    def offsets(self, path: str) -> list[int]:
        with self._lock:
            cached = self._index_cache.get(path)
            if cached is not None:
                self._index_cache.move_to_end(path)
                return cached
        offsets = decode_offsets(self.store.read_bytes(path), path)
        with self._lock:
            self._index_cache[path] = offsets
            while len(self._index_cache) > MAX_CACHED_INDEXES:
                self._index_cache.popitem(last=False)
        return offsets

    def merged_meta(self, header: dict[str, Any]) -> tuple[bytes, bytes]:
        _, _, index, meta = self.merged_partition(header)
        return index, meta

    def merged_partition(self, header: dict[str, Any]) -> tuple[str, int, bytes, bytes]:
        """A merged partition whole: its data file and length, its index and its meta."""
        app, shuffle, merge_id = ids_of(header)
        data, index, meta = self._merged(app, shuffle, merge_id, int_of(header, "reduce"))
        index_bytes = self.store.read_bytes(index)
        length = decode_offsets(index_bytes, index)[-1]
        return data, length, index_bytes, self.store.read_bytes(meta)

    def chunk_range(self, header: dict[str, Any]) -> tuple[str, int, int]:
        app, shuffle, merge_id = ids_of(header)
        data, index, _ = self._merged(app, shuffle, merge_id, int_of(header, "reduce"))
        offsets = self.offsets(index)
        chunk = int_of(header, "chunk")
        start, length = block_range(offsets, chunk, chunk + 1, index)
        return data, start, length

    def _merged(self, app: str, shuffle: int, merge_id: int, reduce_id: int) -> tuple[str, ...]:
        try:
            return self.merges.merged_paths(app, shuffle, merge_id, reduce_id)
        except KeyError as e:
            raise BadRequest(404, str(e.args[0])) from None

    def fetch_range(self, header: dict[str, Any]) -> tuple[str, int, int, list[int]]:
        app, shuffle = app_of(header), int_of(header, "shuffle")
        map_index, attempt = int_of(header, "map"), int_of(header, "attempt")
        data, index = map_output(app, shuffle, map_index, attempt)
        offsets = self.offsets(index)
        start, end = int_of(header, "start"), int_of(header, "end")
        begin, length = block_range(offsets, start, end, index)
        return data, begin, length, [o - begin for o in offsets[start : end + 1]]
