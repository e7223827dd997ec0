"""What the stages of one job commit (or task commit) share, on the house's one stage base.

A committer's stages are functions decorated with `dataferry.stages.stage`, whose first
argument is this `StageContext`: a `StageRun` (statistics, seconds per stage, the stage entered
last, the stage log lines go to `dataferry.commit`) with the store, the committer's config and
layout, the one bounded I/O pool, and the claim's fence.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...stages import StageRun
from ...store import IOPool, Store
from ..records.hold import current_fence

log = logging.getLogger("dataferry.commit")


@dataclass(kw_only=True)
class StageContext(StageRun):
    """The shared state of one job commit's (or task commit's) stages."""

    store: Store
    pool: IOPool
    job_id: str = ""
    config: Any = None
    layout: Any = None
    resumed: bool = False  # finishing a commit that an earlier process decided and left
    # checks that the job still holds the destination's claim before a visible step
    # (`fence(step)`, or `fence(step, strict=False)` per publish batch); a no-op without one
    fence: Callable[..., None] = field(default_factory=lambda: current_fence.get() or _unfenced)
    logger: logging.Logger = field(default=log, repr=False)

    def __post_init__(self) -> None:
        if not self.label and self.job_id:
            self.label = f"job {self.job_id}"

    def close(self) -> None:
        self.pool.close()


def _unfenced(step: str, strict: bool = True) -> None:
    return None
