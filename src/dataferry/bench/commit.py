"""`dataferry bench commit`: the same write job committed by each committer, side by side.

Per committer, in one run on the same store model: the task files are written first with the
model's latency switched off (setting up the job is not what is measured, and costs every
committer the same), then task commits (in parallel, as executors would) and the job commit run
with the full model. Reported: task-commit time, job-commit time with its stages, store requests
by kind, and the job-commit lower bound of the store model with the ratio to it.

The lower bound of a job commit that sends R requests on a model with latency L, `n` I/O threads
and a ceiling of C requests per second is max(R * L / n, R / C) (writes and reads against their
own ceilings). On local disk there is no model; the floor is measured instead: the same number
of bare renames, timed in the same run; on a server reached by URL, its own renames (or the
copies and deletes a rename is there), as many at once as the job commit's I/O threads.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..commit.factory import build_committer, build_config, config_type
from ..commit.job.cleanup import cleanup_destination
from ..commit.job.session import Job, new_session
from ..commit.protocol import TaskCommitMessage
from ..commit.registry import committer_classes
from ..errors import ConfigError, InjectedCrash
from ..store import FaultRule, FaultStore, LocalStore, Op, SimStore, Store, open_store, paths
from . import commit_hadoop, commit_hadoop_s3a
from .floor import floor_kind, measure_rename_floor, measure_store_floor
from .machine import machine_info
from .processes import PeakRss

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CommitBenchSpec:
    committers: tuple[str, ...] = ("v1", "v2", "manifest")
    files: int = 4000
    tasks: int = 40
    partitions: int = 40
    store: str = "sim:abfs"
    io_threads: int = 32
    file_size: int = 1024
    task_parallelism: int = 8
    repeats: int = 1
    kill_at: float | None = None  # kill the job commit after this fraction of its files moved
    hadoop: bool = False  # also Hadoop's own v1 on the same job (commit_hadoop.py)
    hadoop_s3a: bool = False  # also Hadoop's S3A magic committer (commit_hadoop_s3a.py)

    def __post_init__(self) -> None:
        if self.kill_at is not None and not 0.0 < self.kill_at < 1.0:
            raise ConfigError(f"--kill-at must be between 0 and 1, got {self.kill_at}")
        for name, value in (
            ("files", self.files),
            ("tasks", self.tasks),
            ("partitions", self.partitions),
        ):
            if value < 1:
                raise ConfigError(f"--{name} must be >= 1, got {value}")
        if self.files < self.tasks:
            raise ConfigError(f"--files ({self.files}) must be at least --tasks ({self.tasks})")
        for name in self.committers:
            config_type(name)  # an unknown name fails here, before any committer runs


@dataclass
class CommitBenchResult:
    committer: str
    task_commit_s: float
    task_commit_wall_s: float
    job_commit_s: float
    stages: dict[str, float]
    ops: dict[str, int]
    requests: dict[str, int]
    limit_s: float
    files: int
    runs: list[float] = field(default_factory=list)
    task_requests: dict[str, int] = field(default_factory=dict)
    local_disk_bytes: int = 0  # task output staged on the workers' local disk
    job_rss_growth_mib: float | None = None  # peak memory over the size at its start (max of runs)
    recovery: RecoveryRun | None = None  # with --kill-at: finishing the killed commit
    task_commit_median_s: float = 0.0  # one task commit (the median of a run's)

    @property
    def task_bytes_uploaded(self) -> int:
        """Bytes sent to the store by the task commits (the staging committers upload all
        their data there; the others only small records)."""
        return self.task_requests.get("store_bytes_write", 0)

    @property
    def job_bytes_copied(self) -> int:
        """Bytes the store copied during the job commit (renames that are copies)."""
        return self.requests.get("store_bytes_copied", 0)

    @property
    def rest_s(self) -> float | None:
        """What an uninterrupted commit still had to do at the kill point: the part of its
        commit after the intent record (its stages from there on), less the share of files
        already moved. (The killed run itself is slower: it goes through the fault layer.)"""
        if self.recovery is None or not self.recovery.killed:
            return None
        names = list(self.stages)
        decided = names.index("save_intent") + 1 if "save_intent" in names else 0
        finishing = sum(self.stages[n] for n in names[decided:])
        return finishing * (1.0 - self.recovery.fraction)

    @property
    def recovery_to_rest(self) -> float | None:
        """Recovery time over that rest plus one listing of the job directory (the target)."""
        if self.rest_s is None or self.recovery is None:
            return None
        budget = self.rest_s + self.recovery.listing_s
        return self.recovery.recover_s / budget if budget > 0 else None

    @property
    def ratio_to_limit(self) -> float | None:
        """Job commit time over the limit; None where there is no limit (a real server)."""
        return self.job_commit_s / self.limit_s if self.limit_s > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "committer": self.committer,
            "task_commit_s": round(self.task_commit_s, 4),
            "task_commit_wall_s": round(self.task_commit_wall_s, 4),
            "task_commit_median_s": round(self.task_commit_median_s, 5),
            "job_commit_s": round(self.job_commit_s, 4),
            "job_commit_runs_s": [round(r, 4) for r in self.runs],
            "stages": {k: round(v, 4) for k, v in self.stages.items()},
            "ops": self.ops,
            "requests": self.requests,
            "limit_s": round(self.limit_s, 4),
            "ratio_to_limit": None
            if self.ratio_to_limit is None
            else round(self.ratio_to_limit, 2),
            "files": self.files,
            "task_bytes_uploaded": self.task_bytes_uploaded,
            "job_bytes_copied": self.job_bytes_copied,
            "local_disk_bytes": self.local_disk_bytes,
            "job_rss_growth_mib": self.job_rss_growth_mib,
            "recovery": None if self.recovery is None else self.recovery.to_json(),
            "rest_s": None if self.rest_s is None else round(self.rest_s, 4),
            "recovery_to_rest": None
            if self.recovery_to_rest is None
            else round(self.recovery_to_rest, 2),
        }


@dataclass
class RecoveryRun:
    """A job commit killed after `fraction` of its files moved, then finished by recovery."""

    fraction: float
    killed: bool
    until_kill_s: float
    recover_s: float
    outcome: str
    ops: dict[str, int] = field(default_factory=dict)
    listing_s: float = 0.0  # one walk of the dead job's directory, timed on its own

    def to_json(self) -> dict[str, Any]:
        return {
            "fraction": self.fraction,
            "killed": self.killed,
            "until_kill_s": round(self.until_kill_s, 4),
            "recover_s": round(self.recover_s, 4),
            "listing_s": round(self.listing_s, 4),
            "outcome": self.outcome,
            "ops": self.ops,
        }


@dataclass
class CommitBenchReport:
    spec: CommitBenchSpec
    results: list[CommitBenchResult]
    floor_s: float | None  # local disk: bare renames; a server: its renames or copies
    machine: dict[str, Any]
    hadoop: dict[str, Any] | None = None  # Hadoop's v1 (medians), or why it was skipped
    hadoop_s3a: dict[str, Any] | None = None  # Hadoop's magic committer, or why skipped
    floor_what: str = "bare renames"

    def speedup(self, committer: str, baseline: str = "v1") -> float | None:
        by = {r.committer: r for r in self.results}
        if committer in by and baseline in by and by[committer].job_commit_s > 0:
            return by[baseline].job_commit_s / by[committer].job_commit_s
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": "commit",
            "spec": self.spec.__dict__,
            "machine": self.machine,
            "floor_s": None if self.floor_s is None else round(self.floor_s, 4),
            "floor_what": self.floor_what,
            "floor_on": (
                f"{self.spec.store} ({self.spec.io_threads} at once)"
                if floor_kind(self.spec.store) == "store"
                else "local disk"
            ),
            "hadoop": self.hadoop,
            "hadoop_s3a": self.hadoop_s3a,
            "results": [r.to_json() for r in self.results],
            "speedup_vs_v1": {
                r.committer: round(s, 2)
                for r in self.results
                if (s := self.speedup(r.committer)) is not None
            },
        }


def _open(base: str, name: str) -> Store:
    """A fresh destination `name` inside the base directory (of a `sim:` URL or a path)."""
    return open_store(f"{base.rstrip('/')}/{name}")


def _set_latency(store: Store, scale: float) -> None:
    if isinstance(store, SimStore):
        store.latency_scale = scale


def _file_layout(spec: CommitBenchSpec, task: int) -> list[str]:
    """Task t writes its share of the files, spread over every partition: tasks share partition
    directories, the case where v1 cannot rename whole directories."""
    per_task = spec.files // spec.tasks + (1 if task < spec.files % spec.tasks else 0)
    start = task * (spec.files // spec.tasks) + min(task, spec.files % spec.tasks)
    return [
        f"part={(start + j) % spec.partitions:04d}/part-{task:05d}-{j:05d}.bin"
        for j in range(per_task)
    ]


def run_one(
    spec: CommitBenchSpec,
    committer_name: str,
    store: Store,
    latency_scale: float = 1.0,
    kill_after: int | None = None,
) -> CommitBenchResult:
    """One job through `committer_name`; with kill_after, its job commit dies after that many
    files moved (renamed or their upload completed) and `dataferry cleanup` finishes it."""
    options = {"io_threads": spec.io_threads} if committer_name == "manifest" else {}
    fields = {f.name for f in dataclasses.fields(config_type(committer_name))}  # name checked
    staging = tempfile.mkdtemp(prefix="dataferry-bench-staging-")
    if "staging_dir" in fields:
        options["staging_dir"] = staging  # task output on local disk: measured below
    try:
        return _run_one(spec, committer_name, store, options, staging, latency_scale, kill_after)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run_one(
    spec: CommitBenchSpec,
    committer_name: str,
    store: Store,
    options: dict[str, Any],
    staging: str,
    latency_scale: float,
    kill_after: int | None,
) -> CommitBenchResult:
    target = store
    if kill_after is not None:
        target = FaultStore(
            store, [FaultRule(action="crash", when="after", predicate=_nth_move(kill_after))]
        )
        target.armed = False
    committer = build_committer(committer_name, target, build_config(committer_name, options))
    payload = b"x" * spec.file_size
    _set_latency(store, 0.0)
    session = new_session(committer).setup(record_driver=False)  # the commit's cost only
    job = session.context
    attempts = [job.task(t) for t in range(spec.tasks)]

    def write_task(t: Any) -> None:
        committer.setup_task(t)
        for rel in _file_layout(spec, t.task_index):
            committer.write_file(t, rel, payload)

    with ThreadPoolExecutor(spec.task_parallelism) as pool:  # as executors write: at once
        list(pool.map(write_task, attempts))
    local_disk = sum(s.size for s in LocalStore(staging).walk(""))
    _set_latency(store, latency_scale)
    before_tasks = store.stats.snapshot()

    def commit(task: Any) -> tuple[TaskCommitMessage, float]:
        start = time.perf_counter()
        msg = committer.commit_task(task)
        return msg, time.perf_counter() - start

    wall = time.perf_counter()
    with ThreadPoolExecutor(spec.task_parallelism) as pool:
        done = list(pool.map(commit, attempts))
    task_wall = time.perf_counter() - wall
    messages = [m for m, _ in done]
    before = store.stats.snapshot()
    task_requests = _requests(store.stats.diff(before_tasks)["counters"])
    os.sync()  # what the kernel still has to write of the tasks' files: not the commit's cost
    start = time.perf_counter()
    if kill_after is not None:
        return _killed_commit(session, messages, store, target, start, kill_after, spec)
    with PeakRss() as memory:  # the job commit's own memory
        result = session.commit(messages)
    job_commit_s = time.perf_counter() - start
    delta = store.stats.diff(before)["counters"]
    ops = {k: v for k, v in delta.items() if k.startswith("op_")}
    requests = _requests(delta)
    return CommitBenchResult(
        committer=committer_name,
        task_commit_s=sum(s for _, s in done),
        task_commit_wall_s=task_wall,
        job_commit_s=job_commit_s,
        stages={k: v for k, v in result.stage_seconds.items() if k != "total"},
        ops=ops,
        requests=requests,
        limit_s=model_limit(store, requests, spec.io_threads),
        files=result.files,
        task_requests=task_requests,
        local_disk_bytes=local_disk,
        job_rss_growth_mib=memory.growth_mib,
        task_commit_median_s=statistics.median(s for _, s in done),
    )


def _nth_move(n: int) -> Callable[[int, Op, str], bool]:
    """Select the n-th store operation that moves a job's file into the destination."""
    seen = [0]
    lock = threading.Lock()

    def pick(_index: int, op: Op, path: str) -> bool:
        if op not in (Op.RENAME, Op.MULTIPART_COMPLETE) or paths.name(path).startswith("_"):
            return False
        with lock:
            seen[0] += 1
            return seen[0] == n

    return pick


def _killed_commit(
    session: Job,
    messages: list[TaskCommitMessage],
    store: Store,
    target: FaultStore,
    start: float,
    kill_after: int,
    spec: CommitBenchSpec,
) -> CommitBenchResult:
    committer, job = session.committer, session.context
    target.armed = True
    killed = False
    try:
        session.commit(messages)
    except InjectedCrash:
        killed = True
    until_kill = time.perf_counter() - start
    target.armed = False
    committer_classes()  # import every committer now: recovery's time is its own work
    t0 = time.perf_counter()
    store.walk(committer.job_dir(job))
    listing_s = time.perf_counter() - t0
    before = store.stats.snapshot()
    t0 = time.perf_counter()
    report = cleanup_destination(store, older_than_s=0.0)
    recover_s = time.perf_counter() - t0
    ops = {k: v for k, v in store.stats.diff(before)["counters"].items() if k.startswith("op_")}
    outcome = (
        "rolled forward"
        if report.rolled_forward
        else "rolled back"
        if report.rolled_back
        else "nothing to do"
    )
    if report.failed:
        outcome = f"failed: {next(iter(report.failed.values()))}"
    return CommitBenchResult(
        committer=committer.name,
        task_commit_s=0.0,
        task_commit_wall_s=0.0,
        job_commit_s=until_kill,
        stages={},
        ops=ops,
        requests={},
        limit_s=0.0,
        files=spec.files,
        recovery=RecoveryRun(
            kill_after / spec.files, killed, until_kill, recover_s, outcome, ops, listing_s
        ),
    )


def _requests(counters: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counters.items() if k.startswith(("store_requests", "store_bytes"))}


def model_limit(store: Store, requests: dict[str, int], threads: int) -> float:
    """The store model's lower bound for sending these requests with `threads` in flight."""
    if not isinstance(store, SimStore):
        return 0.0
    p = store.profile
    total = requests.get("store_requests", 0)
    writes = requests.get("store_requests_write", 0)
    reads = requests.get("store_requests_read", 0)
    by_latency = total * p.latency_s / max(1, threads)
    by_ceiling = max(
        writes / p.write_ops_per_s if p.write_ops_per_s else 0.0,
        reads / p.read_ops_per_s if p.read_ops_per_s else 0.0,
    )
    return max(by_latency, by_ceiling)


def run_commit_bench(spec: CommitBenchSpec, progress: Progress | None = None) -> CommitBenchReport:
    say = progress or (lambda _msg: None)
    base_dir = tempfile.mkdtemp(prefix="dataferry-bench-commit-")
    floor_on = floor_kind(spec.store)
    if spec.store in ("local", ""):
        base = base_dir
    elif spec.store.startswith("sim:") and spec.store.count(":") == 1:
        base = f"{spec.store}:{base_dir}"
    else:
        base = spec.store
    runs: dict[str, list[CommitBenchResult]] = {c: [] for c in spec.committers}
    killed_runs: dict[str, list[CommitBenchResult]] = {c: [] for c in spec.committers}
    floors: list[float] = []
    floor_what = "bare renames"
    hadoop = commit_hadoop.HadoopPeerRuns(spec.hadoop, spec.store, spec.committers)
    s3a = commit_hadoop_s3a.S3APeerRuns(spec.hadoop_s3a, spec.store)
    try:
        for rep in range(spec.repeats):
            s3a.run(f"{base.rstrip('/')}/hadoop-magic-{rep}", spec, say)
            hadoop.run(spec, say)
            if floor_on == "local":
                say(f"floor: {spec.files} bare renames (run {rep + 1})")
                floors.append(measure_rename_floor(spec.files, spec.file_size))
            elif floor_on == "store":
                say(f"floor: {spec.files} bare moves on the store (run {rep + 1})")
                measured = measure_store_floor(
                    _open(base, f"floor-{rep}"), spec.files, spec.file_size, spec.io_threads
                )
                floors.append(measured.seconds)
                floor_what = measured.what
            for name in spec.committers:  # interleaved, so drift hits every committer alike
                say(f"{name}: run {rep + 1} of {spec.repeats}")
                store = _open(base, f"{name}-{rep}")
                runs[name].append(run_one(spec, name, store))
                store.delete("", recursive=True)
                if spec.kill_at is not None:
                    say(f"{name}: killed at {spec.kill_at:.0%} and recovered (run {rep + 1})")
                    store = _open(base, f"{name}-{rep}-killed")
                    kill_after = max(1, int(spec.files * spec.kill_at))
                    killed_runs[name].append(run_one(spec, name, store, kill_after=kill_after))
                    store.delete("", recursive=True)
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)
        hadoop.close()
        s3a.close()
    results = []
    for name in spec.committers:
        rs = runs[name]
        median = sorted(rs, key=lambda r: r.job_commit_s)[len(rs) // 2]
        median.runs = [r.job_commit_s for r in rs]
        median.task_commit_s = statistics.median(r.task_commit_s for r in rs)
        median.task_commit_median_s = statistics.median(r.task_commit_median_s for r in rs)
        # memory: the most any run grew (later runs reuse what the first one's commit freed)
        growths = [r.job_rss_growth_mib for r in rs if r.job_rss_growth_mib is not None]
        median.job_rss_growth_mib = max(growths) if growths else None
        if killed_runs[name]:
            ks = sorted(killed_runs[name], key=lambda r: r.recovery.recover_s)  # type: ignore[union-attr]
            median.recovery = ks[len(ks) // 2].recovery
        results.append(median)
    floor = statistics.median(floors) if floors else None
    if floor is not None:
        for r in results:
            r.limit_s = floor
    return CommitBenchReport(
        spec, results, floor, machine_info(), hadoop.summary(), s3a.summary(), floor_what
    )
