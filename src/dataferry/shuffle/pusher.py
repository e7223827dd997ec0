"""The map side of push-based shuffle: push a finished map output's blocks to the mergers.

Stages: plan (contiguous blocks of one merger grouped into requests of at most
`max_block_batch_size`; empty blocks and blocks over `max_block_size_to_push` are left to be
fetched from the map output), randomize (request order, and block order inside a request, so
concurrent mappers do not collide on the same partitions), send (one thread per merger up to
`push_threads`, so bytes in flight stay under `push_threads x max_block_batch_size`), and react
(retry BUSY and IO_ERROR with backoff; stop pushing to a merger that cannot be reached, or
that answers QUOTA or refuses the connection for the application's quota (429); stop
everything on TOO_LATE or STALE). Pushing is best effort: whatever is not merged is read from
the map output by the reducer.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import ConfigError, ShuffleError, ShuffleServiceUnavailable, StoreError
from ..stats import IOStatistics
from ..store import Store
from .blocks import Pieces
from .client import PushBlock, ServiceRefused, ShuffleClient, block_size
from .config import PushConfig
from .files import map_output
from .merge import PushCode
from .tenancy import AppCredentials


@dataclass(frozen=True)
class PushTarget:
    """What a map task needs to push: the shuffle's ids and its mergers (from the driver),
    and the application's credentials on them (never shown by repr())."""

    app: str
    shuffle_id: int
    merge_id: int
    num_reduces: int
    mergers: tuple[str, ...]
    credentials: AppCredentials | None = field(default=None, repr=False)
    config: PushConfig = field(default_factory=PushConfig)
    fingerprint: str = ""  # the services' TLS certificate ("" on loopback without TLS)

    def __post_init__(self) -> None:
        if self.credentials is not None and not isinstance(self.credentials, AppCredentials):
            raise ConfigError(
                "credentials must be the application's AppCredentials (from register_app), "
                "not the service-wide token"
            )

    def merger_of(self, reduce_id: int) -> int:
        """Contiguous reduce ranges per merger, the same for every map (Spark's rule)."""
        n = len(self.mergers)
        return min(reduce_id * n // self.num_reduces, n - 1)


@dataclass(frozen=True)
class PushRequest:
    merger: int
    start: int  # byte offset of the first block in the map's data file
    blocks: tuple[tuple[int, int], ...]  # (reduce id, framed length), contiguous

    @property
    def size(self) -> int:
        return sum(n for _, n in self.blocks)


def plan_requests(target: PushTarget, offsets: Sequence[int]) -> list[PushRequest]:
    """Group a map output's pushable blocks into push requests (stage 1)."""
    cfg = target.config
    requests: list[PushRequest] = []
    current: list[tuple[int, int]] = []
    start = merger = -1
    size = 0

    def close() -> None:
        nonlocal current, size
        if current:
            requests.append(PushRequest(merger, start, tuple(current)))
        current, size = [], 0

    for reduce_id in range(len(offsets) - 1):
        length = offsets[reduce_id + 1] - offsets[reduce_id]
        if length == 0:
            continue  # empty blocks are never pushed; contiguity is kept (nothing in between)
        if length > cfg.max_block_size_to_push:
            close()
            continue
        m = target.merger_of(reduce_id)
        if current and (m != merger or size + length > cfg.max_block_batch_size):
            close()
        if not current:
            start, merger = offsets[reduce_id], m
        current.append((reduce_id, length))
        size += length
    close()
    return requests


@dataclass
class PushReport:
    requests: int = 0
    blocks: int = 0
    bytes: int = 0
    codes: dict[str, int] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    over_quota: list[str] = field(default_factory=list)  # mergers that refused for quota
    stopped: str = ""
    announced: int = 0  # mergers told that this map's pushes are complete

    def count(self, code: PushCode) -> None:
        self.codes[code.name] = self.codes.get(code.name, 0) + 1


def push_map_output(
    store: Store,
    target: PushTarget,
    map_index: int,
    attempt: int,
    offsets: Sequence[int],
    stats: IOStatistics | None = None,
    blocks: Sequence[Pieces] | None = None,
    announce: bool = False,
) -> PushReport:
    """Push one map attempt's output to the mergers; returns what happened (never raises for a
    merger's failure: pushing is best effort). With `blocks` (the framed blocks the map task
    still holds) nothing is read back from the map output file. With `announce`, every
    merger that can be reached is told at the end that this map pushes no more (its push
    completion, which the driver collects before it finalizes)."""
    report = PushReport()
    stats = stats if stats is not None else IOStatistics()
    requests = plan_requests(target, offsets)
    rng = random.Random(f"{target.shuffle_id}/{map_index}/{attempt}")
    rng.shuffle(requests)  # stage 2: randomize
    by_merger: dict[int, list[PushRequest]] = (
        {m: [] for m in range(len(target.mergers))} if announce else {}
    )
    for req in requests:
        by_merger.setdefault(req.merger, []).append(req)
    data_path, _ = map_output(target.app, target.shuffle_id, map_index, attempt)
    stop = threading.Event()
    lock = threading.Lock()
    cfg = target.config
    threads = max(1, min(cfg.push_threads, cfg.max_bytes_in_flight // cfg.max_block_batch_size))

    def send_all(merger: int, reqs: list[PushRequest]) -> None:
        address = target.mergers[merger]
        with ShuffleClient(
            address, stats=stats, fingerprint=target.fingerprint, credentials=target.credentials
        ) as client:
            try:
                for req in reqs:
                    if stop.is_set():
                        break
                    if not _send(client, req, rng_for(req)):
                        with lock:
                            report.over_quota.append(address)
                        break  # the rest of this merger's blocks are read from the map output
            except ShuffleServiceUnavailable:
                with lock:
                    report.unreachable.append(address)
                return  # stop pushing to this host; the others go on
            except ServiceRefused as e:
                with lock:
                    if e.status == 429:  # too many connections of the application: leave it
                        report.over_quota.append(address)
                    else:
                        report.stopped = report.stopped or str(e)
                        stop.set()
                if e.status == 429:
                    return
            except (ShuffleError, StoreError) as e:
                with lock:
                    report.stopped = report.stopped or str(e)
                stop.set()  # the map output is gone or the service refuses: stop
            if announce:  # whatever happened, this map pushes no more
                try:
                    client.push_done(target.app, target.shuffle_id, target.merge_id, map_index)
                    with lock:
                        report.announced += 1
                except ShuffleError:
                    pass  # the merger is gone: the driver does not count on its answer

    def rng_for(req: PushRequest) -> random.Random:
        return random.Random(f"{target.shuffle_id}/{map_index}/{attempt}/{req.start}")

    def _send(client: ShuffleClient, req: PushRequest, order: random.Random) -> bool:
        """Push one request's blocks; False when the merger answered QUOTA."""
        batch: list[tuple[int, int, PushBlock]] = []
        if blocks is not None:
            batch = [(map_index, r, blocks[r]) for r, _ in req.blocks]
        else:
            data = memoryview(store.read_range(data_path, req.start, req.size))
            pos = 0
            for reduce_id, length in req.blocks:
                batch.append((map_index, reduce_id, data[pos : pos + length]))
                pos += length
        order.shuffle(batch)
        wait = cfg.retry_wait_s
        for attempt_no in range(cfg.retries + 1):
            codes = client.push(target.app, target.shuffle_id, target.merge_id, batch)
            retry = []
            full = False
            with lock:
                report.requests += 1
                for block, code in zip(batch, codes, strict=True):
                    report.count(code)
                    if code in (PushCode.SUCCESS, PushCode.DUPLICATE):
                        report.blocks += 1
                        report.bytes += block_size(block[2])
                    elif code == PushCode.QUOTA:
                        full = True
                    elif code.retriable and attempt_no < cfg.retries:
                        retry.append(block)
                    elif code.stops_pushing:
                        report.stopped = report.stopped or code.name
                        stop.set()
            if full:
                return False
            if not retry or stop.is_set():
                return True
            batch = retry
            time.sleep(wait)
            wait *= 2
        return True

    with ThreadPoolExecutor(threads, thread_name_prefix="shuffle-push") as pool:
        for f in [pool.submit(send_all, m, reqs) for m, reqs in by_merger.items()]:
            f.result()
    stats.incr("push_blocks", report.blocks)
    stats.incr("push_bytes", report.bytes)
    return report
