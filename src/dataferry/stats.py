"""I/O statistics: counters and durations, serialised in Hadoop's IOStatistics JSON shape.

The JSON has five maps: `counters`, `gauges`, `minimums`, `maximums` (name -> number) and
`meanstatistics` (name -> {"samples", "sum"}). A duration statistic `op` is stored as Hadoop's
duration trackers store it: counter `op` (successes), counter `op.failures`, and
`op.min`/`op.max`/`op.mean` (and `op.failures.min/max/mean`) in milliseconds.

Statistics are thread-safe, merge across threads and processes (`merge`, `snapshot`, `diff`),
and round-trip through JSON so that task statistics can travel in commit messages.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FAILURES = ".failures"


@dataclass(frozen=True)
class DurationSummary:
    """One row of a readable report: an operation's count, failures and times in seconds."""

    name: str
    count: int
    failures: int
    min_s: float
    mean_s: float
    max_s: float
    total_s: float


_KEYS: dict[str, tuple[str, str, str]] = {}
_KEYS_KEPT = 4096  # names whose keys are remembered (a store's operations, a task's stages)


def _sample_keys(name: str) -> tuple[str, str, str]:
    """The mean, min and max keys of a sampled statistic, made once per name: a store times
    every operation, a shuffle service one per merged block."""
    keys = _KEYS.get(name)
    if keys is None:
        keys = (name + ".mean", name + ".min", name + ".max")
        if len(_KEYS) < _KEYS_KEPT:
            _KEYS[name] = keys
    return keys


class IOStatistics:
    """A mutable, thread-safe set of statistics."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, int] = {}
        self.gauges: dict[str, float] = {}
        self.minimums: dict[str, float] = {}
        self.maximums: dict[str, float] = {}
        self.meanstatistics: dict[str, list[float]] = {}  # name -> [samples, sum]
        if data:
            self.merge(data)

    # pickling: locks do not pickle
    def __getstate__(self) -> dict[str, Any]:
        return self.snapshot()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state)

    # --- recording ------------------------------------------------------------------------

    def incr(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + n

    def set_counter(self, name: str, value: int) -> None:
        with self._lock:
            self.counters[name] = value

    def set_gauge(self, name: str, value: float) -> None:
        with self._lock:
            self.gauges[name] = value

    def maximum(self, name: str, value: float) -> None:
        """Keep the largest value seen (a high-water mark)."""
        with self._lock:
            if value > self.maximums.get(name, float("-inf")):
                self.maximums[name] = value

    def add_sample(self, name: str, value: float) -> None:
        """Add one sample to a mean statistic (and its min/max)."""
        with self._lock:
            self._sample(name, value)

    def _sample(self, name: str, value: float) -> None:
        mean, low, high = _sample_keys(name)
        ms = self.meanstatistics.get(mean)
        if ms is None:
            ms = self.meanstatistics[mean] = [0, 0.0]
        ms[0] += 1
        ms[1] += value
        lo = self.minimums.get(low)
        if lo is None or value < lo:
            self.minimums[low] = value
        hi = self.maximums.get(high)
        if hi is None or value > hi:
            self.maximums[high] = value

    def record_duration(self, name: str, seconds: float, failed: bool = False) -> None:
        key = name + FAILURES if failed else name
        value = round(seconds * 1000.0, 3)
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + 1
            self._sample(key, value)

    def duration(self, name: str) -> _Timed:
        """Time the block; an exception (any, crashes included) counts as a failure. A plain
        context manager, not a generator's: a store times every operation with it, a shuffle
        service one per merged block."""
        return _Timed(self, name)

    # --- combining ------------------------------------------------------------------------

    def merge(self, other: IOStatistics | Mapping[str, Any]) -> None:
        """Add another set (or its JSON snapshot) into this one."""
        snap = other.snapshot() if isinstance(other, IOStatistics) else other
        with self._lock:
            for k, v in snap.get("counters", {}).items():
                self.counters[k] = self.counters.get(k, 0) + int(v)
            for k, v in snap.get("gauges", {}).items():
                self.gauges[k] = v
            for k, v in snap.get("minimums", {}).items():
                cur = self.minimums.get(k)
                self.minimums[k] = v if cur is None else min(cur, v)
            for k, v in snap.get("maximums", {}).items():
                cur = self.maximums.get(k)
                self.maximums[k] = v if cur is None else max(cur, v)
            for k, v in snap.get("meanstatistics", {}).items():
                ms = self.meanstatistics.setdefault(k, [0, 0.0])
                ms[0] += int(v.get("samples", 0))
                ms[1] += float(v.get("sum", 0.0))

    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready copy in Hadoop's IOStatisticsSnapshot shape."""
        with self._lock:
            return {
                "counters": dict(sorted(self.counters.items())),
                "gauges": dict(sorted(self.gauges.items())),
                "minimums": dict(sorted(self.minimums.items())),
                "maximums": dict(sorted(self.maximums.items())),
                "meanstatistics": {
                    k: {"samples": int(v[0]), "sum": round(v[1], 3)}
                    for k, v in sorted(self.meanstatistics.items())
                },
            }

    def diff(self, before: Mapping[str, Any]) -> dict[str, Any]:
        """Counters and means added since `before` (a snapshot); min/max are kept as they are."""
        now = self.snapshot()
        b_counters = before.get("counters", {})
        b_means = before.get("meanstatistics", {})
        counters = {
            k: v - b_counters.get(k, 0)
            for k, v in now["counters"].items()
            if v != b_counters.get(k, 0)
        }
        means = {}
        for k, v in now["meanstatistics"].items():
            b = b_means.get(k, {"samples": 0, "sum": 0.0})
            if v["samples"] != b["samples"]:
                means[k] = {"samples": v["samples"] - b["samples"], "sum": v["sum"] - b["sum"]}
        return {
            "counters": counters,
            "gauges": now["gauges"],
            "minimums": now["minimums"],
            "maximums": now["maximums"],
            "meanstatistics": means,
        }

    # --- reading --------------------------------------------------------------------------

    def counter_values(self) -> dict[str, int]:
        """A copy of the counters, taken under the lock (safe while other threads count)."""
        with self._lock:
            return dict(self.counters)

    def counter(self, name: str) -> int:
        with self._lock:
            return self.counters.get(name, 0)

    def durations(self, prefix: str = "") -> list[DurationSummary]:
        """Readable rows for every duration statistic whose name starts with `prefix`."""
        names = sorted(
            {
                k[: -len(".mean")]
                for k in self.meanstatistics
                if k.endswith(".mean") and not k.endswith(FAILURES + ".mean")
            }
            | {
                k[: -len(FAILURES + ".mean")]
                for k in self.meanstatistics
                if k.endswith(FAILURES + ".mean")
            }
        )
        rows = []
        for name in names:
            if not name.startswith(prefix):
                continue
            ok = self.meanstatistics.get(name + ".mean", [0, 0.0])
            bad = self.meanstatistics.get(name + FAILURES + ".mean", [0, 0.0])
            samples = ok[0] + bad[0]
            total_ms = ok[1] + bad[1]
            mins = [
                v
                for v in (
                    self.minimums.get(name + ".min"),
                    self.minimums.get(name + FAILURES + ".min"),
                )
                if v is not None
            ]
            maxs = [
                v
                for v in (
                    self.maximums.get(name + ".max"),
                    self.maximums.get(name + FAILURES + ".max"),
                )
                if v is not None
            ]
            rows.append(
                DurationSummary(
                    name=name,
                    count=int(samples),
                    failures=int(bad[0]),
                    min_s=(min(mins) if mins else 0.0) / 1000.0,
                    mean_s=(total_ms / samples if samples else 0.0) / 1000.0,
                    max_s=(max(maxs) if maxs else 0.0) / 1000.0,
                    total_s=total_ms / 1000.0,
                )
            )
        return rows

    def __repr__(self) -> str:
        return f"IOStatistics(counters={self.counters!r})"


def request_count(requests: Mapping[str, int], ops: Mapping[str, int]) -> int:
    """Requests a job sent to the store: the store's own count (`store_requests`) where it keeps
    one, else the store operations counted (their `.failures` counters left out)."""
    if requests.get("store_requests"):
        return requests["store_requests"]
    return sum(v for k, v in ops.items() if not k.endswith(".failures"))


class _Timed:
    """`IOStatistics.duration`'s timer."""

    __slots__ = ("_name", "_start", "_stats")

    def __init__(self, stats: IOStatistics, name: str) -> None:
        self._stats, self._name = stats, name

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        seconds = time.perf_counter() - self._start
        self._stats.record_duration(self._name, seconds, failed=kind is not None)
