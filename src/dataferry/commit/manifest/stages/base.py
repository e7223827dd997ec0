"""What every stage of the manifest committer shares: the store, the layout, the config, the
one bounded I/O pool, and the statistics each stage records its duration into."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from ....stats import IOStatistics
from ....store import IOPool, Store
from ..config import ManifestConfig
from ..layout import JobLayout

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class StageContext:
    store: Store
    layout: JobLayout
    config: ManifestConfig
    stats: IOStatistics
    pool: IOPool
    job_id: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    last_stage: str = ""


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
