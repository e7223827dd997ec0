"""`dataferry bench markers`: the same write job with direct markers and with the marker service.

Every task runs at once (as executors would), writing its share of the files straight into the
table through the direct committer: a marker, then the data file. On `sim:s3` every request pays
the model's latency, and requests to one prefix share its ceiling: direct markers all land in the
markers prefix, one request each. The marker service (its own process, on the same store model)
turns them into a few appends to `MARKERS<i>` files.

Reported per mode: marker storage requests (to the markers' prefix), marker files at the end,
time spent on markers (marker creation summed over tasks, plus listing and deleting them at job
commit), and the total write time of the job.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..commit.direct.committer import DirectCommitter, DirectConfig
from ..commit.job.session import new_session
from ..errors import ConfigError
from ..markers.base import MARKERS_ROOT, marker_dir
from ..markers.client import MarkerClient
from ..markers.process import MarkerServiceProcess
from ..store import SimStore, open_store
from .machine import machine_info

MODES = ("direct", "service")
PREFIX_STAT = f"store_requests_prefix.{MARKERS_ROOT.split('/')[0]}"


@dataclass(frozen=True)
class MarkersBenchSpec:
    tasks: int = 240
    files: int = 24_000
    partitions: int = 100
    store: str = "sim:s3"
    file_size: int = 64 * 1024
    batch_interval_ms: int = 50
    service_threads: int = 20

    def __post_init__(self) -> None:
        if self.tasks < 1 or self.files < self.tasks:
            raise ConfigError("need --tasks >= 1 and --files >= --tasks")
        if not self.store.startswith("sim:"):
            raise ConfigError("bench markers runs on a store model: --store sim:PROFILE")


def run_mode(spec: MarkersBenchSpec, mode: str, base_dir: str) -> dict[str, Any]:
    url = f"{spec.store}:{base_dir}/{mode}"
    store = open_store(url)
    service = (
        MarkerServiceProcess(
            url,
            token="bench",
            batch_interval_ms=spec.batch_interval_ms,
            threads=spec.service_threads,
        )
        if mode == "service"
        else None
    )
    if service:
        service.start()
    try:
        config = DirectConfig(
            markers=mode, service_url=service.url if service else "", service_token="bench"
        )
        committer = DirectCommitter(store, config)
        payload = b"d" * spec.file_size
        marker_time = 0.0
        lock = threading.Lock()
        start = time.perf_counter()
        session = new_session(committer).setup(record_driver=False)  # the markers' cost only
        job = session.context

        def task(i: int) -> Any:
            nonlocal marker_time
            t = job.task(i)
            spent = 0.0
            written = []
            names = [
                f"day={j % spec.partitions:03d}/part-{j:06d}.parquet"
                for j in range(i, spec.files, spec.tasks)
            ]
            m0 = time.perf_counter()
            committer.announce_files(t, names)  # a task knows its files before writing them
            spent += time.perf_counter() - m0
            for name in names:
                m0 = time.perf_counter()
                final = committer.mark(t, name)
                spent += time.perf_counter() - m0
                store.write_bytes(final, payload)
                written.append(final)
            with lock:
                marker_time += spent
            return committer.commit_task(t, written)

        with ThreadPoolExecutor(spec.tasks) as pool:
            messages = list(pool.map(task, range(spec.tasks)))
        write_phase = time.perf_counter() - start
        inner = store.inner if isinstance(store, SimStore) else store
        marker_files = len(inner.walk(marker_dir(job.job_uuid)))
        result = session.commit(messages)
        write_s = time.perf_counter() - start
        stages = result.stage_seconds
        marker_time += stages.get("list_markers", 0.0) + stages.get("delete_markers", 0.0)
        requests = store.stats.counter(PREFIX_STAT) - 1  # less the commit record
        if service:
            health = MarkerClient(service.url, "bench").health()
            requests += int(health["store"].get(PREFIX_STAT, 0))
        return {
            "markers": mode,
            "marker_ops": requests,
            "marker_files": marker_files,
            "marker_s": round(marker_time, 3),
            "marker_s_per_task": round(marker_time / spec.tasks, 3),
            "write_phase_s": round(write_phase, 3),
            "write_s": round(write_s, 3),
            "job_commit_stages": {k: round(v, 3) for k, v in stages.items()},
            "files_committed": result.files,
        }
    finally:
        if service:
            service.kill(15)


def run_markers_bench(spec: MarkersBenchSpec, progress: Any = None) -> dict[str, Any]:
    say = progress or (lambda _m: None)
    base_dir = tempfile.mkdtemp(prefix="dataferry-bench-markers-")
    try:
        results = []
        for mode in MODES:
            say(mode)
            results.append(run_mode(spec, mode, base_dir))
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)
    by = {r["markers"]: r for r in results}
    d, s = by["direct"], by["service"]
    return {
        "benchmark": "markers",
        "spec": spec.__dict__,
        "machine": machine_info(),
        "results": results,
        "marker_ops_ratio": round(d["marker_ops"] / max(1, s["marker_ops"]), 1),
        "write_time_reduction": round(1 - s["write_s"] / d["write_s"], 3) if d["write_s"] else None,
    }
