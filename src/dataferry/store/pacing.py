"""A strict requests-per-second ceiling, shared by the store models and by committers that
rate-limit their own requests (the role of Hadoop's `fs.azure.io.rate.limit`)."""

from __future__ import annotations

import threading
import time


class Pacer:
    """Each request takes the next free time slot, `1 / per_second` after the previous one."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second if per_second > 0 else 0.0
        self.next_slot = 0.0
        self.lock = threading.Lock()

    def reserve(self) -> float:
        """Seconds the caller must wait before its request may go out (0 without a ceiling)."""
        if not self.interval:
            return 0.0
        with self.lock:
            now = time.perf_counter()
            slot = max(now, self.next_slot)
            self.next_slot = slot + self.interval
            return slot - now

    def acquire(self) -> float:
        """Wait for a slot; returns the seconds waited."""
        wait = self.reserve()
        if wait > 0:
            time.sleep(wait)
        return wait


class TokenBucket:
    """A rate with a burst allowance: `try_take` succeeds while tokens last, refilling at
    `per_second`. Models a server that rejects (HTTP 503) what it cannot take, rather than
    queueing it."""

    def __init__(self, per_second: float, burst_s: float = 0.5) -> None:
        self.rate = per_second
        self.capacity = max(1.0, per_second * burst_s)
        self.tokens = self.capacity
        self.stamp = time.perf_counter()
        self.lock = threading.Lock()

    def try_take(self) -> bool:
        if self.rate <= 0:
            return True
        with self.lock:
            now = time.perf_counter()
            self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return True
            return False
