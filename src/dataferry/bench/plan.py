"""`dataferry plan commit`: predict each committer's task and job commit time and store
requests at sizes no test machine can run (1M files, 10k tasks), from the store model and the
committer's own operation counts.

Stages:
1. `count`: run the committer at eight small jobs of the asked job's shape (files per task,
   partitions) on the store model with its latency switched off; record the store requests
   (reads, writes, bytes) of the task commits and of the job commit, and the time they still
   take (the committer's own CPU and the local disk: "local" time). Fit each as
   a + b*files + c*tasks + d*partitions + e*min(files, tasks*partitions)
   + f*min(files, partitions): the task-partition directories a job creates, and the
   partition directories it uses (least squares).
2. `pace`: two small runs (the median of three each) with the model's latency on and its
   ceilings off: what the committer adds to its local time per second of "busy" time
   (requests x latency + bytes / bandwidth, what the requests would cost one after another) is
   1 / concurrency, how many requests it keeps in flight.
3. `predict`: at the asked size, local + max(busy / concurrency, writes / write ceiling + reads
   / read ceiling), the max rounded off where the two are close (`soft_max`; the stages that
   read and those that write run one after another). Task commits run `task_parallelism` at a
   time.
`dataferry bench report` checks the prediction against measured runs of the model.

Each is a stage of the stage base (`count`, `pace`, `predict_at`; durations under
`plan_stage_<name>`), logged at INFO on the `dataferry.bench` logger.
"""

from __future__ import annotations

import logging
import math
import shutil
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..stages import StageRun, stage
from ..store import LocalStore, SimStore
from ..store.sim.profiles import PROFILES, SimProfile
from .commit import CommitBenchResult, CommitBenchSpec, run_one

PACE_REPEATS = 3

log = logging.getLogger("dataferry.bench")


def pace_sizes(files: int, tasks: int, partitions: int) -> list[tuple[int, int, int]]:
    """Two of the job's shape, small enough to run with the model's latency on and far enough
    apart that the slope between them is not lost in a few milliseconds of noise."""
    per_task = max(1, min(files // tasks, 120))
    parts = max(1, min(partitions, 2000))
    return [(2 * max(1, per_task // 2), 2, parts), (8 * per_task, 8, parts)]


def calibration_sizes(files: int, tasks: int, partitions: int) -> list[tuple[int, int, int]]:
    """Small jobs of the asked job's shape (files per task, partitions): a committer's counts
    depend on how files fall into task and partition directories, so the fit is made where the
    prediction will be used, scaled down in tasks."""
    per_task = max(1, min(files // tasks, 120))
    parts = max(1, min(partitions, 2000))
    sizes = []
    for t, f, d in (
        (2, per_task, parts),
        (4, per_task, parts),
        (6, per_task, parts),
        (4, max(1, per_task // 2), parts),
        (4, max(1, per_task // 4), parts),
        (4, per_task, max(1, parts // 2)),
        (3, per_task, max(1, parts // 4)),
        # more files than partitions, so a count that follows the partition directories in use
        # (min(files, partitions)) is told apart from one that follows the files
        (max(2, math.ceil(2 * parts / per_task)), per_task, parts),
    ):
        sizes.append((t * f, t, d))
    return sizes


KINDS = ("reads", "writes", "bytes_read", "bytes_written", "local_s")


def features(files: int, tasks: int, partitions: int) -> list[float]:
    return [
        1.0,
        files,
        tasks,
        partitions,
        min(files, tasks * partitions),  # task-partition directories
        min(files, partitions),  # partition directories in use
    ]


@dataclass(frozen=True)
class PlanSpec:
    files: int = 1_000_000
    tasks: int = 10_000
    partitions: int = 1_000
    store: str = "hdfs"
    committers: tuple[str, ...] = ("v1", "manifest")
    io_threads: int = 32
    task_parallelism: int = 8
    file_size: int = 1024

    def __post_init__(self) -> None:
        if self.profile_name not in PROFILES:
            raise ConfigError(
                f"store model {self.store!r} unknown; choose from {', '.join(PROFILES)}"
            )
        if min(self.files, self.tasks, self.partitions) < 1 or self.files < self.tasks:
            raise ConfigError("need files >= tasks >= 1 and partitions >= 1")

    @property
    def profile_name(self) -> str:
        return self.store.removeprefix("sim:")

    @property
    def profile(self) -> SimProfile:
        return PROFILES[self.profile_name]


@dataclass
class Phase:
    """Fitted model of one phase (all task commits, or the job commit)."""

    coefficients: dict[str, list[float]]  # kind -> coefficients of `features`
    concurrency: float = 1.0

    def requests(self, files: int, tasks: int, partitions: int) -> dict[str, float]:
        x = np.array(features(files, tasks, partitions))
        return {k: max(0.0, float(np.dot(c, x))) for k, c in self.coefficients.items()}


@dataclass
class CommitterModel:
    committer: str
    profile: str
    tasks: Phase
    job: Phase
    calibration: list[dict[str, Any]] = field(default_factory=list)


def _counts(requests: dict[str, int], seconds: float) -> dict[str, float]:
    return {
        "reads": requests.get("store_requests_read", 0),
        "writes": requests.get("store_requests_write", 0),
        "bytes_read": requests.get("store_bytes_read", 0),
        "bytes_written": requests.get("store_bytes_write", 0),
        "local_s": seconds,
    }


def busy_seconds(profile: SimProfile, counts: dict[str, float]) -> float:
    """What these requests cost one after another on the model."""
    write_bw = (
        profile.copy_bandwidth_bytes_s if profile.rename == "copy" else profile.bandwidth_bytes_s
    )
    return (
        (counts["reads"] + counts["writes"]) * profile.latency_s
        + counts["bytes_read"] / profile.bandwidth_bytes_s
        + counts["bytes_written"] / write_bw
    )


def _run(
    profile: SimProfile, committer: str, size: tuple[int, int, int], spec: PlanSpec, scale: float
) -> CommitBenchResult:
    files, tasks, partitions = size
    directory = tempfile.mkdtemp(prefix="dataferry-plan-")
    try:
        store = SimStore(profile, LocalStore(directory))
        bench = CommitBenchSpec(
            committers=(committer,),
            files=files,
            tasks=tasks,
            partitions=partitions,
            io_threads=spec.io_threads,
            file_size=spec.file_size,
            task_parallelism=spec.task_parallelism,
        )
        return run_one(bench, committer, store, latency_scale=scale)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def calibrate(
    spec: PlanSpec,
    committer: str,
    progress: Callable[[str], None] | None = None,
    run: StageRun | None = None,
) -> CommitterModel:
    """Stages `count` and `pace` for one committer on the spec's store model."""
    run = run if run is not None else _plan_run(committer)
    model = count(run, spec, committer, progress)
    pace(run, spec, model, progress)
    return model


def _plan_run(committer: str = "") -> StageRun:
    return StageRun(logger=log, label=f"plan commit {committer}".rstrip())


@stage("plan_stage_count", "count")
def count(
    run: StageRun, spec: PlanSpec, committer: str, progress: Callable[[str], None] | None = None
) -> CommitterModel:
    """Stage 1: the committer's store requests (and local time) at small jobs of the asked
    shape with the model's latency off, fitted along `features`: a model without its
    concurrency yet."""
    say = progress or (lambda _m: None)
    profile = spec.profile
    rows, task_counts, job_counts = [], [], []
    for size in calibration_sizes(spec.files, spec.tasks, spec.partitions):
        say(f"{committer}: counting at {size[0]} files")
        r = _run(profile, committer, size, spec, 0.0)
        rows.append(features(*size))
        task_counts.append(_counts(r.task_requests, r.task_commit_s))
        job_counts.append(_counts(r.requests, r.job_commit_s))
        run.stats.incr("plan_calibration_runs")
    x = np.array(rows)

    def fit(samples: list[dict[str, float]]) -> dict[str, list[float]]:
        out = {}
        for kind in KINDS:
            y = np.array([s[kind] for s in samples])
            coef, *_ = np.linalg.lstsq(x, y, rcond=None)
            out[kind] = [float(c) for c in coef]
        return out

    return CommitterModel(committer, profile.name, Phase(fit(task_counts)), Phase(fit(job_counts)))


@stage("plan_stage_pace", "pace")
def pace(
    run: StageRun,
    spec: PlanSpec,
    model: CommitterModel,
    progress: Callable[[str], None] | None = None,
) -> CommitterModel:
    """Stage 2: two small runs with the model's latency on and its ceilings off give each
    phase's concurrency (set on `model`, which is returned)."""
    say = progress or (lambda _m: None)
    profile = spec.profile
    committer = model.committer
    unlimited = replace(profile, write_ops_per_s=0, read_ops_per_s=0)
    for size in pace_sizes(spec.files, spec.tasks, spec.partitions):
        say(f"{committer}: pacing at {size[0]} files")
        runs = [_run(unlimited, committer, size, spec, 1.0) for _ in range(PACE_REPEATS)]
        run.stats.incr("plan_pace_runs", len(runs))
        r = runs[0]
        tasks_fit = model.tasks.requests(*size)
        job_fit = model.job.requests(*size)
        model.calibration.append(
            {
                "size": size,
                # all tasks' commit time over their local time, and what they cost one by one;
                # times are medians, as one stall of the machine would skew a single run
                "task_s": statistics.median(x.task_commit_s for x in runs) - tasks_fit["local_s"],
                "task_busy_s": busy_seconds(profile, _counts(r.task_requests, 0.0)),
                "job_s": statistics.median(x.job_commit_s for x in runs) - job_fit["local_s"],
                "job_busy_s": busy_seconds(profile, _counts(r.requests, 0.0)),
            }
        )
    small, large = model.calibration[-2:]
    for phase, t, b in ((model.tasks, "task_s", "task_busy_s"), (model.job, "job_s", "job_busy_s")):
        if large[b] - small[b] > 0.2 * large[b]:  # the busy time grew: use the slope
            concurrency = (large[b] - small[b]) / max(1e-9, large[t] - small[t])
        else:  # a fixed number of requests (v1's task commit renames one directory)
            concurrency = large[b] / max(1e-9, large[t])
        phase.concurrency = min(max(concurrency, 0.1), float(max(spec.io_threads, 1) * 2))
    return model


@dataclass
class Prediction:
    committer: str
    files: int
    tasks: int
    partitions: int
    task_commit_s: float  # one task's commit
    task_commits_wall_s: float  # all tasks, task_parallelism at a time
    job_commit_s: float
    job_requests: int
    task_requests: int
    bound: str  # what limits the job commit: latency or a ceiling

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in self.__dict__.items()}


def predict(
    model: CommitterModel,
    spec: PlanSpec,
    files: int,
    tasks: int,
    partitions: int,
    run: StageRun | None = None,
) -> Prediction:
    """Stage `predict`: one size."""
    run = run if run is not None else _plan_run(model.committer)
    return predict_at(run, model, spec, files, tasks, partitions)


@stage("plan_stage_predict", "predict")
def predict_at(
    run: StageRun, model: CommitterModel, spec: PlanSpec, files: int, tasks: int, partitions: int
) -> Prediction:
    """Stage 3: the committer's task and job commit time and requests at one size."""
    profile = spec.profile
    job = model.job.requests(files, tasks, partitions)
    all_tasks = model.tasks.requests(files, tasks, partitions)
    tasks_busy = busy_seconds(profile, all_tasks) / model.tasks.concurrency
    task_s = (all_tasks["local_s"] + tasks_busy) / tasks
    waves = math.ceil(tasks / spec.task_parallelism)
    tasks_wall = soft_max(waves * task_s, sum(_ceiling_seconds(profile, all_tasks).values()))
    by_latency = busy_seconds(profile, job) / model.job.concurrency
    ceilings = _ceiling_seconds(profile, job)
    by_ceiling = sum(ceilings.values())
    job_s = job["local_s"] + soft_max(by_latency, by_ceiling)
    return Prediction(
        model.committer,
        files,
        tasks,
        partitions,
        task_s,
        tasks_wall,
        job_s,
        round(job["reads"] + job["writes"]),
        round(all_tasks["reads"] + all_tasks["writes"]),
        "latency" if by_latency >= by_ceiling else max(ceilings, key=lambda k: ceilings[k]),
    )


def soft_max(a: float, b: float, k: float = 4.0) -> float:
    """max(a, b), rounded off where the two are close: a committer whose latency-bound time is
    near a ceiling's queues at the ceiling part of the time (measured on the models: within a
    few percent, where the plain max is 20% short)."""
    return (a**k + b**k) ** (1.0 / k)


def _ceiling_seconds(profile: SimProfile, counts: dict[str, float]) -> dict[str, float]:
    return {
        "write ceiling": counts["writes"] / profile.write_ops_per_s
        if profile.write_ops_per_s
        else 0.0,
        "read ceiling": counts["reads"] / profile.read_ops_per_s if profile.read_ops_per_s else 0.0,
    }


def plan_steps(spec: PlanSpec) -> int:
    """How many times `plan_commit` calls its `progress` (a run per calibration and pace size
    of each committer): the total a progress bar counts to."""
    shape = (spec.files, spec.tasks, spec.partitions)
    return len(spec.committers) * (len(calibration_sizes(*shape)) + len(pace_sizes(*shape)))


def plan_commit(spec: PlanSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Calibrate every committer of the spec and predict at its size."""
    predictions, models = [], {}
    for committer in spec.committers:
        run = _plan_run(committer)
        model = calibrate(spec, committer, progress, run)
        models[committer] = model
        predictions.append(predict(model, spec, spec.files, spec.tasks, spec.partitions, run))
    return {
        "spec": {**spec.__dict__, "committers": list(spec.committers)},
        "profile": spec.profile.models,
        "predictions": [p.to_json() for p in predictions],
        "models": {
            name: {
                "task_concurrency": m.tasks.concurrency,
                "job_concurrency": m.job.concurrency,
                "job_requests_per_file": m.job.coefficients["reads"][1]
                + m.job.coefficients["writes"][1],
            }
            for name, m in models.items()
        },
    }
