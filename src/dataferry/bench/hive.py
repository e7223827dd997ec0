"""`dataferry bench hive`: the seed's scenario, loading tens of thousands of staged files into
a partitioned table on a loaded NameNode.

Compared in one run, on the same store model and the same staged tree:
- `one-by-one`: what the seed observed Hive's load doing: partition after partition, file after
  file, an existence check and a rename each;
- `new-partitions`: dataferry's load into partitions the table does not have yet;
- `append`: dataferry's load into partitions that already exist (file moves, `_copy_N` names).

Only the load is timed; staging the files is done with the model's latency switched off, the
same for every mode.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..commit.factory import build_committer, build_config
from ..commit.hive.load import copy_name
from ..commit.hive.staging import ext_dir
from ..errors import ConfigError, NotFound
from ..store import SimStore, Store, open_store, paths
from .commit import model_limit
from .machine import machine_info

MODES = ("one-by-one", "new-partitions", "append")


@dataclass(frozen=True)
class HiveBenchSpec:
    files: int = 20_000
    partitions: int = 200
    store: str = "sim:hdfs-loaded"
    move_threads: int = 15
    load_partition_threads: int = 15
    file_size: int = 1024
    modes: tuple[str, ...] = MODES

    def __post_init__(self) -> None:
        unknown = [m for m in self.modes if m not in MODES]
        if unknown:
            raise ConfigError(f"unknown mode {unknown[0]!r}; modes: {', '.join(MODES)}")
        if self.files < 1 or self.partitions < 1:
            raise ConfigError("--files and --partitions must be >= 1")


@dataclass
class HiveBenchResult:
    mode: str
    load_s: float
    ops: dict[str, int]
    requests: dict[str, int]
    limit_s: float
    files_in_table: int
    stages: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "load_s": round(self.load_s, 4),
            "ops": self.ops,
            "requests": self.requests,
            "limit_s": round(self.limit_s, 4),
            "ratio_to_limit": round(self.load_s / self.limit_s, 2) if self.limit_s else None,
            "files_in_table": self.files_in_table,
            "stages": {k: round(v, 4) for k, v in self.stages.items()},
        }


def one_by_one_load(store: Store, ext: str) -> int:
    """The seed's load: serial, per file an existence check (and `_copy_N` probing), a rename."""
    moved = 0
    for part in store.list(ext):
        if not part.is_dir or paths.is_hidden(part.name):
            continue
        target = paths.relative_to(part.path, ext)
        store.mkdirs(target)
        for f in store.list(part.path):
            dest, n = paths.join(target, f.name), 0
            while store.exists(dest):
                n += 1
                dest = paths.join(target, copy_name(f.name, n))
            store.rename(f.path, dest)
            moved += 1
    return moved


def _latency(store: Store, scale: float) -> None:
    if isinstance(store, SimStore):
        store.latency_scale = scale


def run_mode(spec: HiveBenchSpec, mode: str, base: str) -> HiveBenchResult:
    store = open_store(f"{base}/{mode}")
    config = build_config(
        "hive",
        {
            "mode": "append",
            "move_threads": spec.move_threads,
            "load_partition_threads": spec.load_partition_threads,
            "mark_successful_jobs": False,
        },
    )
    committer = build_committer("hive", store, config)
    job = committer.new_job()
    ext = ext_dir(job)
    _latency(store, 0.0)
    payload = b"x" * spec.file_size

    def stage(i: int) -> None:
        part = f"day={i % spec.partitions:04d}"
        store.write_bytes(f"{ext}/{part}/part-{i:06d}.parquet", payload)
        if mode == "append" and i < spec.partitions:
            store.write_bytes(f"{part}/existing-{i:06d}.parquet", payload)

    with ThreadPoolExecutor(16) as pool:  # the staged tree: not what is measured
        list(pool.map(stage, range(spec.files)))
    _latency(store, 1.0)
    before = store.stats.snapshot()
    start = time.perf_counter()
    stages: dict[str, float] = {}
    if mode == "one-by-one":
        one_by_one_load(store, ext)
    else:
        stages = committer.load(job).stage_seconds
    load_s = time.perf_counter() - start
    delta = store.stats.diff(before)["counters"]
    _latency(store, 0.0)
    files = sum(1 for s in store.walk("") if not paths.is_hidden(s.path))
    requests = {k: v for k, v in delta.items() if k.startswith("store_requests")}
    try:
        store.delete("", recursive=True)
    except NotFound:
        pass
    return HiveBenchResult(
        mode=mode,
        load_s=load_s,
        ops={k: v for k, v in delta.items() if k.startswith("op_")},
        requests=requests,
        limit_s=model_limit(store, requests, spec.move_threads),
        files_in_table=files,
        stages=stages,
    )


def run_hive_bench(spec: HiveBenchSpec, progress: Any = None) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    tmp = tempfile.mkdtemp(prefix="dataferry-bench-hive-")
    if spec.store.startswith("sim:") and spec.store.count(":") == 1:
        base = f"{spec.store}:{tmp}"
    elif "://" in spec.store:  # a real server (hdfs://namenode:port/dir)
        base = spec.store.rstrip("/")
    else:
        base = tmp
    try:
        results = []
        for mode in spec.modes:
            say(mode)
            results.append(run_mode(spec, mode, base))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    by = {r.mode: r for r in results}
    baseline = by.get("one-by-one")
    return {
        "benchmark": "hive",
        "spec": spec.__dict__,
        "machine": machine_info(),
        "results": [r.to_json() for r in results],
        "speedup_vs_one_by_one": {
            r.mode: round(baseline.load_s / r.load_s, 1)
            for r in results
            if baseline is not None and r.load_s > 0
        },
    }
