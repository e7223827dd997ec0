"""The report of a push-based shuffle on Dask: what the shuffle's tasks publish on a Dask event
topic as they finish, routed to the `DaskShuffleReport` of their shuffle on the client."""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from ..stats import IOStatistics

REPORT_TOPIC = "dataferry-shuffle"  # the Dask event topic the shuffle's tasks publish on


@dataclass
class DaskShuffleReport:
    """What a shuffle did. `push`, `maps` and `reduces` are set when `shuffle` plans the graph;
    the rest is filled at compute time, from events the barrier task (`finalize`) and the
    reduce tasks (`reduce_reads`, `reduce_read_bytes`, and `reduce_ref_blocks`: merged blocks
    found where their stubs said, on the reducer's host) publish as they finish. Computing the
    result again runs the shuffle again: the report then describes the latest computation
    (`merge_id` tells them apart)."""

    push: bool
    maps: int
    reduces: int
    finalize: dict[str, Any] = field(default_factory=dict)
    reduce_reads: int = 0
    reduce_read_bytes: int = 0
    reduce_ref_blocks: int = 0
    merge_id: int = -1  # of the computation described; -1 until one has finalized
    map_stats: dict[str, Any] = field(default_factory=dict)  # the map tasks', summed
    reduce_stats: dict[str, Any] = field(default_factory=dict)  # the reduce tasks', summed

    def record(self, event: dict[str, Any]) -> None:
        """Take one event: a finalize with a new merge id starts describing that computation;
        a reduce event counts only if its computation is the one described."""
        if event["merge_id"] != self.merge_id:
            if event["kind"] != "finalize":
                return  # a reduce of a computation whose barrier this report has not seen
            self.merge_id, self.reduce_reads, self.reduce_read_bytes = event["merge_id"], 0, 0
            self.reduce_ref_blocks = 0
            self.reduce_stats = {}
        if event["kind"] == "finalize":
            self.push, self.finalize = event["push"], event["finalize"]
            self.map_stats = event.get("stats", {})
        else:
            self.reduce_reads += event["reduce_reads"]
            self.reduce_read_bytes += event["reduce_read_bytes"]
            self.reduce_ref_blocks += event.get("reduce_ref_blocks", 0)
            total = IOStatistics(self.reduce_stats)
            total.merge(event.get("stats", {}))
            self.reduce_stats = total.snapshot()


@dataclass
class _Subscription:
    """A Client's one subscription to the topic: the reports it routes to, by application."""

    reports: weakref.WeakValueDictionary[str, DaskShuffleReport] = field(
        default_factory=weakref.WeakValueDictionary
    )
    lock: threading.Lock = field(default_factory=threading.Lock)

    def route(self, event: tuple[float, dict[str, Any]]) -> None:
        _, msg = event
        with self.lock:
            target = self.reports.get(msg.get("app", ""))
            if target is not None:
                target.record(msg)


# each Client's subscription, kept here rather than on the Client: it goes when the Client does
_SUBSCRIPTIONS: weakref.WeakKeyDictionary[Any, _Subscription] = weakref.WeakKeyDictionary()
_SUBSCRIPTIONS_LOCK = threading.Lock()


def watch(client: Any, app: str, report: DaskShuffleReport) -> None:
    """Route the events of shuffle `app` to `report` (one subscription per client; a report
    the user dropped is forgotten)."""
    with _SUBSCRIPTIONS_LOCK:
        subscription = _SUBSCRIPTIONS.get(client)
        if subscription is None:
            subscription = _SUBSCRIPTIONS[client] = _Subscription()
            client.subscribe_topic(REPORT_TOPIC, subscription.route)
    with subscription.lock:
        subscription.reports[app] = report
