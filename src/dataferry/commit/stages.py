"""The stage base every committer's job commit runs on.

A job commit is a sequence of named stages (Hadoop's manifest committer is the model: load,
create directories, rename, save success, cleanup). Each stage is a function whose first
argument is a `StageContext`; the `stage` decorator records its duration under its Hadoop-style
statistic name and in `ctx.stage_seconds`, and remembers it as the last stage entered, so a
failure can say where it happened.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from ..stats import IOStatistics
from ..store import IOPool, Store
from .claim import current_fence

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class StageContext:
    """What the stages of one job commit (or task commit) share: the store, the committer's
    config and layout, the one bounded I/O pool, and the statistics."""

    store: Store
    stats: IOStatistics
    pool: IOPool
    job_id: str = ""
    config: Any = None
    layout: Any = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    last_stage: str = ""
    resumed: bool = False  # finishing a commit that an earlier process decided and left
    # checks that the job still holds the destination's claim before a visible step
    # (`fence(step)`, or `fence(step, strict=False)` per publish batch); a no-op without one
    fence: Callable[..., None] = field(default_factory=lambda: current_fence.get() or _unfenced)

    def close(self) -> None:
        self.pool.close()


def _unfenced(step: str, strict: bool = True) -> None:
    return None


def stage(statistic: str, short: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Mark a function (whose first argument is the StageContext) as a named stage: its
    duration goes to `statistic` (Hadoop's name) and to ctx.stage_seconds[short]."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            ctx = args[0]
            assert isinstance(ctx, StageContext)
            ctx.last_stage = statistic
            start = time.perf_counter()
            try:
                with ctx.stats.duration(statistic):
                    return fn(*args, **kwargs)
            finally:
                ctx.stage_seconds[short] = ctx.stage_seconds.get(short, 0.0) + (
                    time.perf_counter() - start
                )

        return run

    return wrap
