"""The reduce side: read a reduce partition's blocks, merged where possible, every map once.

Stages: `meta` (the merged partition's index and per-chunk bitmaps; they must add up to the
driver's bitmap; a partition up to `max_merged_read_bytes` comes whole with them, in one
read), `chunks` (each merged chunk, every block checked: frame, checksum, map in
the chunk's bitmap, each map once), `fallback` (a chunk that fails is replaced by its maps'
original blocks, found by its bitmap; a merger that cannot be reached gives up all its pending
chunks), `originals` (the maps missing from the merged bitmap, and every map when nothing was
merged, fetched from their map outputs). The three sets are disjoint, so each map's block
arrives exactly once.

Host-local reads (Spark's `spark.shuffle.readHostLocalDisk`): a merged partition whose merger's
directory is on the reducer's host (`ReduceInput.local_dirs`) is read whole from that
directory through a store, skipping the service and the second copy over loopback. Only the
finalized merge the driver was told about is read: the index must end at the size finalize
reported, the meta must add up to its bitmap, and every block is checked as a fetched one is.
A file that is missing, short or does not match falls back to the service's fetch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import CorruptShuffleData, ShuffleError, ShuffleServiceUnavailable, StoreError
from ..extras import require
from ..net.retry import Backoff, retrying
from ..stats import IOStatistics
from ..store import Store, open_store
from .blocks import Block, BlockRef, Resolver, stub_refs, unframe
from .client import ServiceRefused, ShuffleClient
from .config import ReadConfig
from .driver import MergedPartition
from .files import decode_offsets, map_output, merged_files
from .mapoutput import MapStatus
from .open_outputs import open_map_outputs
from .tenancy import AppCredentials, check_credentials

BitMap = require("pyroaring", "the push shuffle").BitMap

# a block merged by reference is mapped from its file from this size up, and read below it: a
# reduce keeps every block until it is decoded, and a mapping per small block would count
# against the process's mappings (vm.max_map_count) by the thousand
MAPPED_FROM = 1 << 20

T = TypeVar("T")


@dataclass(frozen=True)
class ReduceInput:
    """Everything a reduce task needs (picklable); the application's credentials are never
    shown by repr()."""

    app: str
    shuffle_id: int
    merge_id: int
    reduce_id: int
    maps: tuple[MapStatus, ...]
    merged: MergedPartition | None = None
    credentials: AppCredentials | None = field(default=None, repr=False)
    config: ReadConfig = field(default_factory=ReadConfig)
    fingerprint: str = ""  # the services' TLS certificate ("" on loopback without TLS)
    # service address -> its directory (path or store URL), for the services on this host
    local_dirs: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_credentials(self.credentials)


@dataclass
class ReadReport:
    merged_chunks: int = 0
    merged_blocks: int = 0
    fallback_chunks: int = 0
    fallback_maps: int = 0
    original_blocks: int = 0
    host_local_bytes: int = 0  # merged bytes read from the merger's directory, not fetched


class _Clients:
    """One connection per service for the duration of a read."""

    def __init__(
        self, credentials: AppCredentials | None, stats: IOStatistics, fingerprint: str = ""
    ) -> None:
        self.credentials, self.stats, self.fingerprint = credentials, stats, fingerprint
        self._clients: dict[str, ShuffleClient] = {}

    def __call__(self, address: str) -> ShuffleClient:
        if address not in self._clients:
            self._clients[address] = ShuffleClient(
                address,
                stats=self.stats,
                fingerprint=self.fingerprint,
                credentials=self.credentials,
            )
        return self._clients[address]

    def close(self) -> None:
        for c in self._clients.values():
            c.close()


def read_reduce(
    inp: ReduceInput, stats: IOStatistics | None = None
) -> tuple[list[Block], ReadReport]:
    """The blocks of one reduce partition, sorted by map index, and how they were read."""
    stats = stats if stats is not None else IOStatistics()
    report = ReadReport()
    clients = _Clients(inp.credentials, stats, inp.fingerprint)
    blocks: list[Block] = []
    try:
        merged_maps = BitMap()
        fallback = BitMap()
        if inp.merged is not None:
            merged_maps = inp.merged.bitmap
            got, failed = _read_merged(inp, clients, report)
            blocks.extend(got)
            fallback |= failed
        # originals: maps with a block for this reduce that the merge does not hold, plus the
        # maps of failed chunks
        for status in inp.maps:
            size = status.sizes[inp.reduce_id]
            if size == 0:
                continue
            if status.map_index in merged_maps and status.map_index not in fallback:
                continue
            blocks.extend(_read_original(inp, clients, status))
            report.original_blocks += 1
        report.fallback_maps = len(fallback)
    finally:
        clients.close()
    blocks.sort(key=lambda b: b.map_index)
    seen = [b.map_index for b in blocks]
    if len(seen) != len(set(seen)):
        raise ShuffleError(f"reduce {inp.reduce_id}: a map's block was read twice")
    return blocks, report


def _read_merged(
    inp: ReduceInput, clients: _Clients, report: ReadReport
) -> tuple[list[Block], BitMap]:
    """(blocks read from merged chunks, maps to fall back to)."""
    merged = inp.merged
    assert merged is not None
    client = clients(merged.location)
    whole = merged.size <= inp.config.max_merged_read_bytes
    ids = (inp.app, inp.shuffle_id, inp.merge_id, inp.reduce_id)
    local = _read_host_local(inp, merged)
    if local is not None:
        whole, (index, meta, data, offsets, chunk_maps) = True, local
        report.host_local_bytes += merged.size
        for name, n in (("reduce_reads", 1), ("reduce_read_bytes", merged.size)):
            clients.stats.incr(name, n)  # a read all the same: one, sequential, from the file
        clients.stats.incr("reduce_host_local_bytes", merged.size)
        _count(clients.stats, "merged", merged.size)
    else:
        try:
            if whole:  # index, meta and every chunk in one read
                index, meta, data = _retrying(inp.config, lambda: client.merged_partition(*ids))
                _count(clients.stats, "merged", len(data))
            else:
                index, meta = _retrying(inp.config, lambda: client.merged_meta(*ids))
                _count(clients.stats, "merged", len(index) + len(meta))
            offsets, chunk_maps = _chunk_bitmaps(index, meta, merged)
        except (ShuffleError, CorruptShuffleData, ValueError):
            report.fallback_chunks += 1
            return [], BitMap(merged.bitmap)  # no usable meta: the whole partition falls back
    blocks: list[Block] = []
    fallback = BitMap()
    host_down = False
    resolve = _Resolver(inp, clients)
    for chunk, maps in enumerate(chunk_maps):
        if host_down:
            fallback |= maps
            report.fallback_chunks += 1
            continue
        try:
            if whole:
                part = data[offsets[chunk] : offsets[chunk + 1]]
            else:
                part = client.merged_chunk(*ids, chunk)
                _count(clients.stats, "merged", len(part))
            where = f"{merged.location} chunk {chunk}"
            got = _check_chunk(part, maps, inp.reduce_id, where, resolve)
        except ShuffleServiceUnavailable:
            host_down = True  # the next chunks from this host would fail as well
            fallback |= maps
            report.fallback_chunks += 1
            continue
        except (ShuffleError, CorruptShuffleData):
            fallback |= maps
            report.fallback_chunks += 1
            continue
        blocks.extend(got)
        report.merged_chunks += 1
        report.merged_blocks += len(got)
        clients.stats.incr("reduce_merged_blocks", len(got))
    return blocks, fallback


def _count(stats: IOStatistics, source: str, nbytes: int) -> None:
    """One read of the reduce side by where it went: `merged` (a merged partition or chunk,
    whatever it holds), `ref` (a block a stub names, read from its map output) or
    `original` (a block fetched from its map output). Each is one request or one read of a
    file: what `bench shuffle` reports as the reads a reduce really makes."""
    stats.incr(f"reduce_{source}_reads")
    stats.incr(f"reduce_{source}_read_bytes", nbytes)


def _read_host_local(inp: ReduceInput, merged: MergedPartition) -> tuple | None:
    """(index, meta, data, offsets, chunk bitmaps) of the merged partition read from its
    merger's directory on this host, or None when it is not here or does not match the
    finalized merge (then the service is asked)."""
    directory = inp.local_dirs.get(merged.location) if inp.config.host_local else None
    if not directory:
        return None
    data_path, index_path, meta_path = merged_files(
        inp.app, inp.shuffle_id, inp.merge_id, inp.reduce_id
    )
    try:
        store = open_store(directory)
        index = memoryview(store.read_bytes(index_path))
        meta = memoryview(store.read_bytes(meta_path))
        offsets, chunk_maps = _chunk_bitmaps(index, meta, merged)
        data = store.read_view(data_path, 0, merged.size) if merged.size else memoryview(b"")
    except (StoreError, ShuffleError, CorruptShuffleData, ValueError, OSError):
        return None
    if len(data) != merged.size:
        return None  # cut short after finalize (removed or rewritten): the service decides
    return index, meta, data, offsets, chunk_maps


def _chunk_bitmaps(
    index: memoryview, meta: memoryview, merged: MergedPartition
) -> tuple[list[int], list[BitMap]]:
    """The chunks' offsets and bitmaps, checked against the driver's view of the partition."""
    offsets = decode_offsets(bytes(index), f"merged index of reduce {merged.reduce_id}")
    bitmaps: list[BitMap] = []
    pos = 0
    for _ in range(len(offsets) - 1):
        bm = BitMap.deserialize(bytes(meta[pos:]))
        bitmaps.append(bm)
        pos += len(bm.serialize())
    union = BitMap()
    for bm in bitmaps:
        union |= bm
    if pos != len(meta) or union != merged.bitmap or offsets[-1] != merged.size:
        raise CorruptShuffleData(
            f"merged meta of reduce {merged.reduce_id} does not match the merge status"
        )
    return offsets, bitmaps


class _Resolver:
    """Finds the block a merged stub names (see `blocks.py`): mapped from the holding service's
    directory when that is on this host, else fetched from the service. Only services that
    hold this shuffle's map outputs are asked; what is found is checked against the stub."""

    def __init__(self, inp: ReduceInput, clients: _Clients) -> None:
        self.inp, self.clients = inp, clients
        self.known = {s.location for s in inp.maps} | set(inp.local_dirs)
        self.stores: dict[str, Store] = {}
        self.ready: dict[BlockRef, memoryview] = {}  # read ahead by `prefetch`

    def prefetch(self, refs: list[BlockRef]) -> None:
        """Read the blocks of a chunk's stubs that lie in map outputs kept open on this host,
        all at once (`OpenMapOutputs.read_many`: one buffer, the statistics counted once),
        for `__call__` to hand out as `unframe` meets their stubs. Reading one stub at a time
        cost 87 us of CPU a block (a path, a buffer, a lock and six statistics each): 1.7
        CPU-s for the 20,000 blocks of 1 GiB in 100 x 200. What is not read here (remote,
        large, or failing) is found one by one as before."""
        inp = self.inp
        if not inp.config.keep_open or not inp.config.host_local:
            return
        by_dir: dict[str, list[BlockRef]] = {}
        for ref in refs:
            directory = inp.local_dirs.get(ref.holder)
            if directory and ref.holder in self.known and ref.length < MAPPED_FROM:
                by_dir.setdefault(directory, []).append(ref)
        merge = (inp.app, inp.shuffle_id, inp.merge_id)
        for directory, mine in by_dir.items():
            ranges = [
                (map_output(inp.app, inp.shuffle_id, r.map_index, r.attempt)[0], r.offset, r.length)
                for r in mine
            ]
            try:
                views = open_map_outputs().read_many(
                    merge, self._store(directory), directory, ranges
                )
            except (StoreError, OSError, ValueError):
                continue  # each is asked for again, one by one, when its stub is met
            blocks = nbytes = 0
            for ref, view in zip(mine, views, strict=True):
                if len(view) == ref.length:  # else: cut short, asked for again when met
                    self.ready[ref] = view
                    blocks, nbytes = blocks + 1, nbytes + ref.length
            # counted as `_mapped` and `_count` count a block read by reference
            for name, n in (("blocks", blocks), ("bytes", nbytes), ("reads", blocks)):
                self.clients.stats.incr(f"reduce_ref_{name}", n)
            self.clients.stats.incr("reduce_ref_read_bytes", nbytes)

    def _store(self, directory: str) -> Store:
        return self.stores.get(directory) or self.stores.setdefault(
            directory, open_store(directory)
        )

    def __call__(self, ref: BlockRef) -> memoryview:
        ready = self.ready.pop(ref, None)
        if ready is not None:
            return ready  # read (and counted) by prefetch
        try:
            block = self._find(ref)
            _count(self.clients.stats, "ref", len(block))  # a read of its own, however found
            return block
        except ShuffleError as e:  # the holder failed, not the merger: this chunk falls back
            raise CorruptShuffleData(f"map {ref.map_index}'s block at {ref.holder}: {e}") from None

    def _find(self, ref: BlockRef) -> memoryview:
        inp = self.inp
        if ref.holder not in self.known:
            raise CorruptShuffleData(f"a stub names {ref.holder!r}, which holds no map output here")
        directory = inp.local_dirs.get(ref.holder) if inp.config.host_local else None
        if directory:
            view = self._mapped(directory, ref)
            if view is not None:
                return view

        def fetch() -> memoryview:
            _, data = self.clients(ref.holder).fetch(
                inp.app,
                inp.shuffle_id,
                ref.map_index,
                ref.attempt,
                ref.reduce_id,
                ref.reduce_id + 1,
            )
            return data

        return _retrying(inp.config, fetch)

    def _mapped(self, directory: str, ref: BlockRef) -> memoryview | None:
        """The block from the holder's directory on this host (None: ask the service)."""
        data_path, _ = map_output(self.inp.app, self.inp.shuffle_id, ref.map_index, ref.attempt)
        try:
            store = self.stores.get(directory) or self.stores.setdefault(
                directory, open_store(directory)
            )
            if ref.length >= MAPPED_FROM:
                view = store.read_view(data_path, ref.offset, ref.length)
            elif self.inp.config.keep_open:  # from the file kept open for this merge
                merge = (self.inp.app, self.inp.shuffle_id, self.inp.merge_id)
                outputs = open_map_outputs()
                block = outputs.read(merge, store, directory, data_path, ref.offset, ref.length)
                view = memoryview(block)
            else:
                view = memoryview(store.read_range(data_path, ref.offset, ref.length))
        except (StoreError, OSError, ValueError):
            return None
        if len(view) != ref.length:
            return None
        # not a read of its own: the block is mapped from a file already in memory, where a
        # fetched one is a request (and counted as one by the client)
        self.clients.stats.incr("reduce_ref_blocks")
        self.clients.stats.incr("reduce_ref_bytes", ref.length)
        return view


def _check_chunk(
    data: memoryview, maps: BitMap, reduce_id: int, where: str, resolve: Resolver
) -> list[Block]:
    if isinstance(resolve, _Resolver):
        resolve.prefetch(stub_refs(data))
    got = list(unframe(data, where, resolve))
    seen = BitMap(b.map_index for b in got)
    if len(seen) != len(got) or seen != maps or any(b.reduce_id != reduce_id for b in got):
        raise CorruptShuffleData(f"{where}: blocks do not match the chunk's bitmap")
    return got


def _read_original(inp: ReduceInput, clients: _Clients, status: MapStatus) -> list[Block]:
    where = f"map {status.map_index} attempt {status.attempt} at {status.location}"

    def fetch() -> list[Block]:
        _, data = clients(status.location).fetch(
            inp.app,
            inp.shuffle_id,
            status.map_index,
            status.attempt,
            inp.reduce_id,
            inp.reduce_id + 1,
        )
        got = list(unframe(data, where))
        if len(got) != 1 or got[0].map_index != status.map_index:
            raise CorruptShuffleData(f"{where}: expected one block of reduce {inp.reduce_id}")
        _count(clients.stats, "original", len(data))
        return got

    return _retrying(inp.config, fetch)


def _retrying(config: ReadConfig, fn: Callable[[], T]) -> T:
    """Retry a read while the service cannot be reached (it may be restarting) or has as many
    connections of the application open as it takes (429), with the services' backoff."""
    backoff = Backoff(config.fetch_retry_wait_s, attempts=config.fetch_retries + 1)
    return retrying(fn, backoff, _worth_retrying)


def _worth_retrying(e: BaseException) -> bool:
    if isinstance(e, ServiceRefused):
        return e.status == 429
    return isinstance(e, ShuffleServiceUnavailable)
