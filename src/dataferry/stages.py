"""The one stage base: every multi-step algorithm of dataferry is a sequence of named stages.

Hadoop's manifest committer is the model (setup, load manifests, create directories, rename,
save success, cleanup): each stage has explicit arguments and a result, runs once, records its
duration (and the counters it moved) in `IOStatistics`, logs its entry and exit, and marks its
failure, so a failed operation can say in which stage it failed.

A stage is a function whose first argument is the operation's `StageRun` (or an object that
extends it, as a job commit's `StageContext` does), decorated with `stage(statistic, name)`:

    @stage("job_stage_rename_files", "rename_files")
    def rename_files(run: StageRun, manifests: list[Manifest]) -> int: ...

Each call is one execution: the decorator builds a `Stage` for it, and a `Stage` object runs
once (a second `run` raises). The exit line names the stage, its seconds and the counters it
changed; job-level stages log it at INFO, per-task and per-block stages at DEBUG.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from .stats import FAILURES, IOStatistics

P = ParamSpec("P")
R = TypeVar("R")
Run = TypeVar("Run", bound="StageRun")

log = logging.getLogger("dataferry")
JOB_LEVEL = logging.INFO  # a job-level stage's exit line (one per job commit stage)
TASK_LEVEL = logging.DEBUG  # per task, per map output, per block: too many lines for INFO
_seconds_lock = threading.Lock()  # stages of one run may end on several threads at once


@dataclass
class StageRun:
    """What the stages of one operation (a job commit, a shuffle's finalize, a write plan)
    share: its statistics, each stage's seconds, the stage entered last and the one that
    failed, and the logger its stage lines go to."""

    stats: IOStatistics = field(default_factory=IOStatistics)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    last_stage: str = ""
    failed_stage: str = ""
    logger: logging.Logger = field(default=log, repr=False)
    label: str = ""  # what the operation is, for its log lines (e.g. the job id)
    started: float = field(default_factory=time.perf_counter, repr=False)

    def seconds(self) -> dict[str, float]:
        """Each stage's seconds, and `total` since the run began."""
        return {**self.stage_seconds, "total": time.perf_counter() - self.started}


class StageAlreadyRun(RuntimeError):
    """A `Stage` object was asked to run a second time (a programming error)."""


class Stage(Generic[P, R]):
    """One execution of one named stage: `Stage(fn, statistic, name).run(run, *args)`."""

    def __init__(
        self,
        fn: Callable[..., R],
        statistic: str,
        name: str,
        level: int = logging.INFO,
    ) -> None:
        self.fn = fn
        self.statistic = statistic
        self.name = name
        self.level = level
        self.done = False
        self.seconds = 0.0

    def run(self, run: StageRun, *args: Any, **kwargs: Any) -> R:
        if self.done:
            raise StageAlreadyRun(f"stage {self.name} has already run")
        self.done = True
        run.last_stage = self.statistic
        logger = run.logger
        label = f"{run.label}: " if run.label else ""
        logger.debug("%sstage %s: starting", label, self.name)
        enabled = logger.isEnabledFor(self.level)
        before = run.stats.counter_values() if enabled else {}
        start = time.perf_counter()
        try:
            with run.stats.duration(self.statistic):
                result = self.fn(run, *args, **kwargs)
        except BaseException as e:
            self.seconds = time.perf_counter() - start
            run.failed_stage = run.failed_stage or self.statistic
            _add(run, self.name, self.seconds)
            logger.log(
                max(self.level, logging.INFO),
                "%sstage %s failed after %.3f s: %s",
                label,
                self.name,
                self.seconds,
                f"{type(e).__name__}: {e}" if str(e) else type(e).__name__,
            )
            raise
        self.seconds = time.perf_counter() - start
        _add(run, self.name, self.seconds)
        if enabled:
            moved = _moved(before, run.stats.counter_values(), self.statistic)
            logger.log(
                self.level,
                "%sstage %s: %.3f s%s",
                label,
                self.name,
                self.seconds,
                f" ({moved})" if moved else "",
            )
        return result


def stage(
    statistic: str, name: str, *, level: int = logging.INFO
) -> Callable[[Callable[Concatenate[Run, P], R]], Callable[Concatenate[Run, P], R]]:
    """Make a function (first argument: the operation's StageRun) a named stage: each call is
    one `Stage` execution, timed under `statistic` (Hadoop's name where Hadoop has one) and
    under `name` in `run.stage_seconds`, logged at `level` on exit."""

    def wrap(fn: Callable[Concatenate[Run, P], R]) -> Callable[Concatenate[Run, P], R]:
        @functools.wraps(fn)
        def call(run: Run, *args: P.args, **kwargs: P.kwargs) -> R:
            if not isinstance(run, StageRun):
                raise TypeError(
                    f"stage {name}: first argument must be a StageRun, not {type(run).__name__}"
                )
            return Stage(fn, statistic, name, level).run(run, *args, **kwargs)

        call.statistic = statistic  # type: ignore[attr-defined]
        call.stage_name = name  # type: ignore[attr-defined]
        return call

    return wrap


def _add(run: StageRun, name: str, seconds: float) -> None:
    with _seconds_lock:
        run.stage_seconds[name] = run.stage_seconds.get(name, 0.0) + seconds


def _moved(before: dict[str, int], after: dict[str, int], own: str) -> str:
    """The counters a stage changed, as `name=+n` (its own duration counters left out; a
    counter of another statistic that merely starts with the same name is kept)."""
    parts = []
    for key, value in after.items():
        if key in (own, own + FAILURES):
            continue
        delta = value - before.get(key, 0)
        if delta:
            parts.append(f"{key}={delta:+}")  # `+`, not `+d`: a counter set to a float logs too
    return ", ".join(parts[:12])
