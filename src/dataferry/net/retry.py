"""The one way the services' clients and servers try again: exponential backoff with full
jitter, a cap on each wait, and a bound on the tries (a number of attempts, a deadline, or both).

`Backoff` says how long to wait before each retry; `retrying` runs a call again while it fails
with what the caller names as worth retrying. A loop that decides from an answer rather than an
exception (the pusher's BUSY blocks) walks `Backoff.waits()` itself.

Full jitter (each wait uniform in [0, ceiling]) keeps clients that failed together from
retrying together; the ceiling doubles from `base_s` up to `cap_s`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from ..errors import ConfigError

T = TypeVar("T")

RetryOn = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]

# the longest single wait unless told: Spark's `spark.shuffle.io.retryWait` default (5s), the
# fixed wait our doubling waits stand in for
DEFAULT_CAP_S = 5.0

_random = random.Random()


@dataclass(frozen=True)
class Backoff:
    """How long to wait between tries, and how many tries there are.

    base_s: the ceiling of the first wait; each next ceiling doubles, up to `cap_s`.
    cap_s: the longest wait; None: `DEFAULT_CAP_S`, or `base_s` when that is larger.
    attempts: tries in all, the first included (None: no limit; then set a deadline or stop
        the loop yourself).
    deadline_s: no retry starts later than this many seconds after the first try (a wait that
        would end past it is not waited). None: no deadline.
    jitter: full jitter (each wait uniform in [0, ceiling]); False waits the ceiling itself
        (for a single waiter, such as an accept loop, that has nobody to collide with).
    """

    base_s: float = 0.05
    cap_s: float | None = None
    attempts: int | None = 4
    deadline_s: float | None = None
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.base_s < 0 or (self.cap_s is not None and self.cap_s < self.base_s):
            raise ConfigError(f"need 0 <= base_s <= cap_s, not {self.base_s} and {self.cap_s}")
        if self.attempts is not None and self.attempts < 1:
            raise ConfigError(f"attempts must be >= 1 or None, not {self.attempts}")
        if self.deadline_s is not None and self.deadline_s < 0:
            raise ConfigError(f"deadline_s must be >= 0 or None, not {self.deadline_s}")

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry number `retry` (0 is the first retry)."""
        cap = max(DEFAULT_CAP_S, self.base_s) if self.cap_s is None else self.cap_s
        return min(cap, self.base_s * 2.0 ** min(retry, 64))

    def wait(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry number `retry`: jittered below its ceiling, or the ceiling."""
        top = self.ceiling(retry)
        return (rng or _random).uniform(0.0, top) if self.jitter else top

    def waits(
        self, rng: random.Random | None = None, clock: Callable[[], float] = time.monotonic
    ) -> Iterator[float]:
        """The waits between tries, one per retry the bounds still allow; the deadline counts
        from this call (make it just before the first try)."""
        return self._waits(rng, clock, clock())

    def _waits(
        self, rng: random.Random | None, clock: Callable[[], float], start: float
    ) -> Iterator[float]:
        retry = 0
        while self.attempts is None or retry + 1 < self.attempts:
            wait = self.wait(retry, rng)
            if self.deadline_s is not None and clock() + wait - start > self.deadline_s:
                return
            yield wait
            retry += 1


def retrying(
    fn: Callable[[], T],
    backoff: Backoff,
    retry_on: RetryOn,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> T:
    """fn(), called again after each of `backoff`'s waits while it raises what `retry_on`
    names (exception types, or a predicate of the exception). Anything else, and the last
    failure once the bound is reached, is raised as it came."""
    waits = backoff.waits(rng)
    while True:
        try:
            return fn()
        except Exception as e:
            if not _wanted(e, retry_on):
                raise
            wait = next(waits, None)
            if wait is None:
                raise
        sleep(wait)


def _wanted(e: BaseException, retry_on: RetryOn) -> bool:
    if isinstance(retry_on, (tuple, type)):
        return isinstance(e, retry_on)
    return bool(retry_on(e))
