"""The services' one retry helper: bounded, backing off with growing capped waits, and retrying
only what it is told to (no real sleeps: a recording `sleep` and a fake clock)."""

from __future__ import annotations

import random

import pytest

from dataferry.errors import ConfigError
from dataferry.net.retry import DEFAULT_CAP_S, Backoff, retrying


class Failing:
    """Raises each of `errors` in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors, self.calls = list(errors), 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_gives_up_after_its_attempts_with_the_last_failure():
    slept: list[float] = []
    fn = Failing(*(ConnectionError(f"down {i}") for i in range(10)))
    with pytest.raises(ConnectionError, match="down 3"):
        retrying(fn, Backoff(0.01, attempts=4), ConnectionError, sleep=slept.append)
    assert fn.calls == 4 and len(slept) == 3


def test_succeeds_once_the_failures_stop():
    slept: list[float] = []
    fn = Failing(ConnectionError(), TimeoutError())
    assert retrying(fn, Backoff(0.01, attempts=5), OSError, sleep=slept.append) == "ok"
    assert fn.calls == 3 and len(slept) == 2


def test_waits_double_up_to_the_cap():
    plain = Backoff(0.1, cap_s=1.0, attempts=8, jitter=False)
    assert list(plain.waits()) == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])
    jittered = Backoff(0.1, cap_s=1.0, attempts=200)
    waits = list(jittered.waits(random.Random(3)))
    assert len(waits) == 199
    assert all(0.0 <= w <= jittered.ceiling(i) for i, w in enumerate(waits))
    assert max(waits) <= 1.0 and len(set(waits)) > 150  # full jitter: spread, never over the cap
    assert sum(waits[:3]) / 3 < sum(waits[-100:]) / 100  # later ones from larger ceilings


def test_a_deadline_bounds_the_retries():
    now = [100.0]
    backoff = Backoff(0.3, cap_s=0.3, attempts=None, deadline_s=1.0, jitter=False)
    taken = []
    for wait in backoff.waits(clock=lambda: now[0]):
        taken.append(wait)
        now[0] += wait  # the wait passes (the tries themselves take no time here)
    assert taken == pytest.approx([0.3, 0.3, 0.3])  # a fourth would end past the deadline


def test_retries_only_what_it_is_told_to():
    slept: list[float] = []
    fn = Failing(ValueError("a bug, not an outage"))
    with pytest.raises(ValueError):
        retrying(fn, Backoff(0.01, attempts=5), ConnectionError, sleep=slept.append)
    assert fn.calls == 1 and slept == []

    class Refused(Exception):
        def __init__(self, status: int) -> None:
            self.status = status

    fn = Failing(Refused(429), Refused(401))
    with pytest.raises(Refused) as refused:
        retrying(fn, Backoff(0.01, attempts=5), lambda e: e.status == 429, sleep=slept.append)
    assert refused.value.status == 401 and fn.calls == 2 and len(slept) == 1


def test_one_attempt_means_no_retry_and_bad_bounds_are_refused():
    assert list(Backoff(attempts=1).waits()) == []
    assert Backoff(0.1).ceiling(30) == DEFAULT_CAP_S  # unless told, the cap is 5 s
    assert Backoff(8.0).ceiling(3) == 8.0  # or the first wait, when that is longer
    for bad in ({"attempts": 0}, {"base_s": -1.0}, {"base_s": 2.0, "cap_s": 1.0}):
        with pytest.raises(ConfigError):
            Backoff(**bad)
