"""Where a shuffle's time goes on Dask: its tasks by stage, what the pushers and the shuffle
services did, and CPU and peak memory per process.

Stages come from Dask's task stream: a dataferry shuffle's tasks are named
`dataferry-shuffle-<stage>-...` (begin, map, barrier) and `shuffle_reduce_...` (a reduce;
`dataferry-shuffle_reduce_...` where Dask fused it with its partition's id, which runs as a
task of its own, `reduce id`, where Dask does not fuse); Dask's own shuffles are grouped by
their key prefix (`shuffle-transfer`, `shuffle_p2p`, ...). For each stage: its tasks, the
seconds they computed (summed over workers) and when the stage ran (from the first task's
start). Pushing runs beside the map tasks, on each worker's pusher: its seconds are the
pushers', and the merge's are the services' CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..stats import IOStatistics
from .processes import ProcessSampler

STAGE_PREFIX = "dataferry-shuffle-"
REDUCE_MARK = "shuffle_reduce_"  # in a reduce task's name, fused with its partition's id or not


def stage_of(key: Any) -> str:
    from dask.utils import key_split

    name = key[0] if isinstance(key, tuple) else str(key)
    if REDUCE_MARK in name:
        return "reduce"
    if name.startswith(STAGE_PREFIX):
        return name[len(STAGE_PREFIX) :].split("-", 1)[0]
    split = key_split(name)
    return "reduce id" if split == "dataferry" else split  # a reduce's partition id, unfused


def task_stages(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task stream's compute intervals, grouped by stage, in the order stages began."""
    stages: dict[str, dict[str, Any]] = {}
    for task in stream:
        for ss in task.get("startstops", ()):
            if ss.get("action") != "compute":
                continue
            s = stages.setdefault(
                stage_of(task["key"]),
                {"tasks": 0, "busy_s": 0.0, "start": ss["start"], "stop": ss["stop"]},
            )
            s["tasks"] += 1
            s["busy_s"] += ss["stop"] - ss["start"]
            s["start"], s["stop"] = min(s["start"], ss["start"]), max(s["stop"], ss["stop"])
    if not stages:
        return []
    t0 = min(s["start"] for s in stages.values())
    return [
        {
            "stage": name,
            "tasks": s["tasks"],
            "busy_s": round(s["busy_s"], 2),
            "from_s": round(s["start"] - t0, 2),
            "to_s": round(s["stop"] - t0, 2),
        }
        for name, s in sorted(stages.items(), key=lambda kv: kv[1]["start"])
    ]


def _pusher_stats(dask_worker: Any = None) -> dict[str, Any]:
    from ..shuffle import process_pusher

    return process_pusher().stats.snapshot()


def _summed(snapshots: dict[str, dict[str, Any]]) -> IOStatistics:
    total = IOStatistics()
    for snap in snapshots.values():
        total.merge(snap)
    return total


def _seconds(stats: dict[str, Any], name: str) -> float:
    """Total seconds of a duration statistic (its samples times its mean, in ms)."""
    mean = stats.get("meanstatistics", {}).get(f"{name}.mean")
    return round(mean["sum"] / 1000.0, 2) if mean else 0.0


class DaskShuffleProfile:
    """Measures one shuffle on a Dask client: `with profile.measure(): ...`, then `result()`."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.stream: list[dict[str, Any]] = []
        self.sampler = ProcessSampler()
        self._pushers_before: dict[str, Any] = {}
        self._pushers: dict[str, Any] = {}
        self._services_before: dict[str, Any] = {}
        self._services: dict[str, Any] = {}

    @contextmanager
    def measure(self) -> Iterator[None]:
        import distributed

        self._pushers_before = _summed(self.client.run(_pusher_stats)).snapshot()
        self._services_before = self._service_stats()
        with self.sampler, distributed.get_task_stream(client=self.client) as ts:
            yield
        self.stream = ts.data
        self._pushers = _summed(self.client.run(_pusher_stats)).diff(self._pushers_before)
        self._services = IOStatistics(self._service_stats()).diff(self._services_before)

    def _service_stats(self) -> dict[str, Any]:
        from ..dask.push_shuffle import ensure_services
        from ..shuffle import ShuffleClient

        services = ensure_services(self.client)
        total = IOStatistics()
        for address in services.addresses.values():
            with ShuffleClient(address, services.token, fingerprint=services.fingerprint) as c:
                total.merge(c.service_stats())
        return total.snapshot()

    def result(self, report: Any = None) -> dict[str, Any]:
        """The profile; `report` (a DaskShuffleReport) adds the phases inside the tasks."""
        pushed = self._pushers.get("counters", {})
        merged = self._services.get("counters", {})
        maps = getattr(report, "map_stats", None) or {}
        reduces = getattr(report, "reduce_stats", None) or {}
        finalize = getattr(report, "finalize", None) or {}
        phases = {
            "map: from pandas": _seconds(maps, "map_from_pandas"),
            "map: split and encode": _seconds(maps, "map_split"),
            "map: write map output": _seconds(maps, "map_write"),
            "map: push or hand to the pusher": _seconds(maps, "map_push"),
            "pushers (beside the maps)": _seconds(self._pushers, "push_map"),
            "barrier: wait for push completions": round(finalize.get("waited_s", 0.0), 2),
            "reduce: read": _seconds(reduces, "reduce_read"),
            "reduce: decode": _seconds(reduces, "reduce_decode"),
            "reduce: to pandas": _seconds(reduces, "reduce_to_pandas"),
        }
        return {
            "stages": task_stages(self.stream),
            "phases": {k: v for k, v in phases.items() if v},
            "push": {
                "maps": pushed.get("push_maps", 0),
                "push_s": _seconds(self._pushers, "push_map"),
                "from_memory": pushed.get("push_maps_from_memory", 0),
                "from_file": pushed.get("push_maps_from_file", 0),
            },
            "merge": {
                "blocks": merged.get("merged_blocks", 0),
                "mib": round(merged.get("merged_bytes", 0) / 2**20, 1),
                "served_mib": round(merged.get("served_bytes", 0) / 2**20, 1),
            },
            "finalize_wait_s": round(finalize.get("waited_s", 0.0), 2),
            "processes": self.sampler.result(),
        }


PROFILE_COLUMNS = ("method", "stage", "tasks", "busy s", "from s", "to s")


def profile_rows(results: list[dict[str, Any]]) -> list[list[str]]:
    """The profiles of a bench's Dask results as table rows (the CLI's and the page's):
    each stage, then the phases inside the tasks, then CPU seconds by process role."""
    rows: list[list[str]] = []
    for r in results:
        prof = r.get("profile")
        if not prof:
            continue
        for st in prof["stages"]:
            if st["stage"] == "generate_pandas":
                continue  # the input's own tasks, alike for every method
            rows.append(
                [
                    r["method"],
                    st["stage"],
                    str(st["tasks"]),
                    f"{st['busy_s']:.2f}",
                    f"{st['from_s']:.2f}",
                    f"{st['to_s']:.2f}",
                ]
            )
        for phase, seconds in prof.get("phases", {}).items():
            rows.append([r["method"], f"  {phase}", "", f"{seconds:.2f}", "", ""])
        for role, p in r.get("processes", {}).items():
            if p["cpu_s"]:
                rows.append(
                    [r["method"], f"CPU: {role} x{p['processes']}", "", f"{p['cpu_s']:.2f}", "", ""]
                )
    return rows


SCALE_COLUMNS = (
    "engine",
    "method",
    "GiB",
    "wall s",
    "s/GiB",
    "x smallest",
    "reduce reads",
    "worker MiB",
    "service MiB",
    "driver MiB",
)


def scale_rows(scale: list[dict[str, Any]]) -> list[list[str]]:
    """The scale curve's rows (time per GiB and peak memory per process role, per size)."""

    def mib(v: Any) -> str:
        return f"{v:.0f}" if v else "-"

    return [
        [
            r["engine"],
            r["method"],
            f"{r['gib']:g}",
            f"{r['wall_s']:.2f}",
            f"{r['s_per_gib']:.2f}",
            f"{r['vs_smallest']:.2f}" if r["vs_smallest"] else "-",
            str(r["reduce_reads"] or "-"),
            mib(r.get("worker_rss_mib")),
            mib(r.get("service_rss_mib")),
            mib(r.get("driver_rss_mib")),
        ]
        for r in scale
    ]
