"""The map side of push-based shuffle: push a finished map output's blocks to the mergers.

Stages: plan (contiguous blocks of one merger grouped into requests of at most
`max_block_batch_size`; empty blocks and blocks over `max_block_size_to_push` are left to be
fetched from the map output), randomize (request order, and block order inside a request, so
concurrent mappers do not collide on the same partitions), send (one thread per merger up to
`push_threads`, so bytes in flight stay under `push_threads x max_block_batch_size`), and react
(retry BUSY and IO_ERROR with the services' backoff, `net.retry`: doubling, capped, jittered;
stop pushing to a merger that cannot be reached, or that answers QUOTA or refuses the
connection for the application's quota (429); stop everything on TOO_LATE or STALE).
Pushing is best effort: whatever is not merged is read from the map output by the reducer.
A process keeps its connections to the mergers from one map output to the next
(`client_pool.py`): across hosts each is a TLS handshake.

Each stage is a function of the stage base (`plan`, `randomize`, `send`, and `react` on each
answer), timed under `push_stage_<name>` in the push's statistics and logged at DEBUG (they run
once per map output, `react` once per request) on the `dataferry.shuffle` logger.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import ShuffleError, ShuffleServiceUnavailable, StoreError
from ..net.addresses import host_of
from ..net.retry import Backoff
from ..stages import TASK_LEVEL, StageRun, stage
from ..stats import IOStatistics
from ..store import Store
from .blocks import Pieces
from .client import PushBlock, ServiceRefused, ShuffleClient
from .client_pool import process_clients
from .config import PushConfig
from .files import map_output
from .merge import PushCode
from .tenancy import AppCredentials, check_credentials

log = logging.getLogger("dataferry.shuffle")


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
        check_credentials(self.credentials)

    def by_reference_only(self, location: str) -> bool:
        """Whether every merger is pushed to by reference from a map output held by the
        service at `location` (then the pusher needs none of the blocks' bytes)."""
        return self.config.by_reference and all(same_host(m, location) for m in self.mergers)

    def merger_of(self, reduce_id: int) -> int:
        """Contiguous reduce ranges per merger, the same for every map (Spark's rule)."""
        n = len(self.mergers)
        return min(reduce_id * n // self.num_reduces, n - 1)


Ref = tuple[int, int, int]  # a block of the map output: (reduce id, offset, framed length)


@dataclass(frozen=True)
class PushRequest:
    merger: int
    start: int  # byte offset of the first block in the map's data file
    blocks: tuple[tuple[int, int], ...]  # (reduce id, framed length), contiguous

    @property
    def size(self) -> int:
        return sum(n for _, n in self.blocks)

    def refs(self) -> list[Ref]:
        """The request's blocks as (reduce id, offset, length) in the map output."""
        out, pos = [], self.start
        for reduce_id, length in self.blocks:
            out.append((reduce_id, pos, length))
            pos += length
        return out


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


@dataclass
class _Push:
    """One map attempt's push: what its stages share (the report under `lock`, and `stop`,
    set when the mergers must not be sent anything more)."""

    store: Store
    target: PushTarget
    map_index: int
    attempt: int
    blocks: Sequence[Pieces] | None
    announce: bool
    data_path: str
    location: str  # the service whose directory holds the map output ("": not known)
    report: PushReport = field(default_factory=PushReport)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seed(self, *more: object) -> str:
        return "/".join(
            str(x) for x in (self.target.shuffle_id, self.map_index, self.attempt, *more)
        )


@dataclass
class Reaction:
    """What one answer of a merger means: the blocks merged (or merged before), those to
    send again, whether the merger is over its quota, and why to stop pushing at all."""

    codes: list[PushCode]
    blocks: int = 0
    bytes: int = 0
    retry: list[Ref] = field(default_factory=list)
    quota: bool = False
    stop: str = ""


def push_map_output(
    store: Store,
    target: PushTarget,
    map_index: int,
    attempt: int,
    offsets: Sequence[int],
    stats: IOStatistics | None = None,
    blocks: Sequence[Pieces] | None = None,
    announce: bool = False,
    location: str = "",
) -> PushReport:
    """Push one map attempt's output to the mergers; returns what happened (never raises for a
    merger's failure: pushing is best effort). With `blocks` (the framed blocks the map task
    still holds) nothing is read back from the map output file. With `announce`, every
    merger that can be reached is told at the end that this map pushes no more (its push
    completion, which the driver collects before it finalizes). With `location` (the service
    whose directory holds the map output), a merger on that service's host is pushed to by
    reference (`PushConfig.by_reference`)."""
    run = StageRun(
        stats if stats is not None else IOStatistics(),
        logger=log,
        label=f"shuffle {target.app}/{target.shuffle_id} map {map_index}.{attempt}",
    )
    data_path, _ = map_output(target.app, target.shuffle_id, map_index, attempt)
    push = _Push(store, target, map_index, attempt, blocks, announce, data_path, location)
    requests = plan(run, target, offsets)
    by_merger = randomize(run, push, requests)
    report = send(run, push, by_merger)
    run.stats.incr("push_blocks", report.blocks)
    run.stats.incr("push_bytes", report.bytes)
    return report


@stage("push_stage_plan", "plan", level=TASK_LEVEL)
def plan(run: StageRun, target: PushTarget, offsets: Sequence[int]) -> list[PushRequest]:
    """Stage 1: the map output's pushable blocks grouped into push requests."""
    return plan_requests(target, offsets)


@stage("push_stage_randomize", "randomize", level=TASK_LEVEL)
def randomize(
    run: StageRun, push: _Push, requests: list[PushRequest]
) -> dict[int, list[PushRequest]]:
    """Stage 2: the requests in a random order (the same for a retried attempt), by merger;
    with `announce`, every merger is there, even one this map sends no block to."""
    order = list(requests)
    random.Random(push.seed()).shuffle(order)
    by_merger: dict[int, list[PushRequest]] = (
        {m: [] for m in range(len(push.target.mergers))} if push.announce else {}
    )
    for req in order:
        by_merger.setdefault(req.merger, []).append(req)
    return by_merger


@stage("push_stage_send", "send", level=TASK_LEVEL)
def send(run: StageRun, push: _Push, by_merger: dict[int, list[PushRequest]]) -> PushReport:
    """Stage 3: each merger's requests in order on a thread of its own, `push_threads` (and
    `max_bytes_in_flight`) at most; returns the push's report."""
    cfg = push.target.config
    threads = max(1, min(cfg.push_threads, cfg.max_bytes_in_flight // cfg.max_block_batch_size))
    with ThreadPoolExecutor(threads, thread_name_prefix="shuffle-push") as pool:
        futures = [
            pool.submit(_send_to_merger, run, push, m, reqs) for m, reqs in by_merger.items()
        ]
        for f in futures:
            f.result()
    return push.report


@stage("push_stage_react", "react", level=TASK_LEVEL)
def react(
    run: StageRun, batch: Sequence[Ref], codes: Sequence[PushCode], may_retry: bool
) -> Reaction:
    """Stage 4, on each answer: merged and duplicate blocks are done; QUOTA leaves the rest of
    this merger's blocks to the map output; BUSY and IO_ERROR are sent again (while
    `may_retry`); TOO_LATE and STALE stop the whole push."""
    reaction = Reaction(list(codes))
    for block, code in zip(batch, codes, strict=True):
        if code in (PushCode.SUCCESS, PushCode.DUPLICATE):
            reaction.blocks += 1
            reaction.bytes += block[2]
        elif code == PushCode.QUOTA:
            reaction.quota = True
        elif code.retriable and may_retry:
            reaction.retry.append(block)
        elif code.stops_pushing:
            reaction.stop = reaction.stop or code.name
    return reaction


def _send_to_merger(run: StageRun, push: _Push, merger: int, reqs: list[PushRequest]) -> None:
    """One merger's requests, and the end of its connection: what a failure to reach it
    means, and (with `announce`) its push completion."""
    target, report = push.target, push.report
    address = target.mergers[merger]
    by_reference = [target.config.by_reference and same_host(address, push.location)]
    clients = process_clients()  # connections kept from the maps this process pushed before
    with clients.client(address, run.stats, target.fingerprint, target.credentials) as client:
        try:
            for req in reqs:
                if push.stop.is_set():
                    break
                if not _send_request(run, push, client, req, by_reference):
                    with push.lock:
                        report.over_quota.append(address)
                    break  # the rest of this merger's blocks are read from the map output
        except ShuffleServiceUnavailable:
            with push.lock:
                report.unreachable.append(address)
            return  # stop pushing to this host; the others go on
        except ServiceRefused as e:
            with push.lock:
                if e.status == 429:  # too many connections of the application: leave it
                    report.over_quota.append(address)
                else:
                    report.stopped = report.stopped or str(e)
                    push.stop.set()
            if e.status == 429:
                return
        except (ShuffleError, StoreError) as e:
            with push.lock:
                report.stopped = report.stopped or str(e)
            push.stop.set()  # the map output is gone or the service refuses: stop
        if push.announce:  # whatever happened, this map pushes no more
            try:
                client.push_done(target.app, target.shuffle_id, target.merge_id, push.map_index)
                with push.lock:
                    report.announced += 1
            except ShuffleError:
                pass  # the merger is gone: the driver does not count on its answer


def same_host(merger: str, location: str) -> bool:
    """Whether a merger runs on the host of the service holding a map output (`location`)."""
    return bool(location) and host_of(merger) == host_of(location)


def _blocks(push: _Push, refs: Sequence[Ref]) -> list[tuple[int, int, PushBlock]]:
    """The blocks' bytes, from the map task's buffers or read back from its output."""
    if push.blocks is not None:
        return [(push.map_index, r, push.blocks[r]) for r, _, _ in refs]
    start = min(offset for _, offset, _ in refs)
    end = max(offset + length for _, offset, length in refs)
    data = push.store.read_view(push.data_path, start, end - start)
    return [
        (push.map_index, r, data[offset - start : offset - start + length])
        for r, offset, length in refs
    ]


def _push_once(
    push: _Push, client: ShuffleClient, batch: list[Ref], by_reference: list[bool]
) -> list[PushCode]:
    """Send the blocks once: by reference while the merger takes that (it must know the
    service holding the map output, and the application there), else as bytes. A merger that refuses a push by
    reference is sent bytes from then on (`by_reference[0]` turns False)."""
    target = push.target
    if by_reference[0]:
        try:
            return client.push_ref(
                target.app,
                target.shuffle_id,
                target.merge_id,
                push.map_index,
                push.attempt,
                push.location,
                batch,
            )
        except ServiceRefused as e:
            if e.status not in (400, 403, 404, 413):
                raise
            log.debug("push by reference to %s refused (%s): pushing bytes", client.address, e)
            by_reference[0] = False
    return client.push(target.app, target.shuffle_id, target.merge_id, _blocks(push, batch))


def _send_request(
    run: StageRun,
    push: _Push,
    client: ShuffleClient,
    req: PushRequest,
    by_reference: list[bool],
) -> bool:
    """Push one request's blocks (in a random order of their own), sending again what
    `react` says to with backoff; False when the merger answered QUOTA."""
    report, cfg = push.report, push.target.config
    batch = req.refs()
    random.Random(push.seed(req.start)).shuffle(batch)
    waits = Backoff(cfg.retry_wait_s, attempts=cfg.retries + 1).waits()
    while True:
        codes = _push_once(push, client, batch, by_reference)
        wait = next(waits, None)  # None: this was the last try
        reaction = react(run, batch, codes, wait is not None)
        with push.lock:
            report.requests += 1
            for code in reaction.codes:
                report.count(code)
            report.blocks += reaction.blocks
            report.bytes += reaction.bytes
            if reaction.stop:
                report.stopped = report.stopped or reaction.stop
                push.stop.set()
        if reaction.quota:
            return False
        if not reaction.retry or push.stop.is_set():
            return True
        batch = reaction.retry
        assert wait is not None  # react asks for retries only while a try is left
        time.sleep(wait)
