"""`bench write --profile`: where a partitioned write's time goes, next to polars'.

The same generated table is written by `dataferry.write_dataset` and by polars, pyarrow and
Delta Lake, all at one codec (the comparison is of writers, not of codecs), each warmed up and
then timed in rotated order (`bench write`'s `_measure`). Each run records its wall time and
the process's CPU seconds (all threads: what the write cost the machine). dataferry's runs
are also cut into their parts, from the figures the write itself keeps:

- the plan on the driver (`plan_s`: split by partition, sample the encoding, cut, pack);
- the tasks' thread-seconds splitting and gathering rows (`split_s`) and in the format writer
  (`encode_s`: encode, compress, write), summed over the tasks;
- the job's setup, the tasks' wall time (task commits included) and the job commit;
- what is left of the wall time (the destination's claim, job setup, the engine's start).

The peers keep no such figures: only their wall and CPU seconds are shown.
"""

from __future__ import annotations

import resource
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from ..dataset.synthetic import sales_table
from ..errors import ConfigError
from .machine import machine_info
from .write import Progress, _failure, _measure, _Steps
from .writers import FERRY_MODULES, Group, Writer, _group, delta_rows

CODECS = ("snappy", "zstd", "lz4", "none")

# (row key, what it is) in the order the table shows them
PARTS = (
    ("plan_split_s", "plan: split by partition (driver)"),
    ("plan_measure_s", "plan: sample the encoding (driver)"),
    ("plan_other_s", "plan: cut and pack the tasks (driver)"),
    ("split_s", "tasks: split and gather rows (thread-s)"),
    ("encode_s", "tasks: encode, compress, write (thread-s)"),
    ("setup_s", "job setup (driver)"),
    ("tasks_s", "tasks: wall, task commits included"),
    ("job_commit_s", "job commit"),
    ("other_s", "claim, job setup, engine start (wall left over)"),
)


@dataclass(frozen=True)
class ProfileSpec:
    rows: int = 3_000_000
    compression: str = "snappy"
    repeats: int = 3
    partition_by: tuple[str, ...] = ("day", "region")

    def __post_init__(self) -> None:
        if self.compression not in CODECS:
            raise ConfigError(
                f"--compression {self.compression!r}: choose from {', '.join(CODECS)}"
            )
        for name in ("rows", "repeats"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name} must be >= 1, got {getattr(self, name)}")


def _process_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _with_cpu(write: Callable[[Any, str], Any]) -> Callable[[Any, str], dict[str, Any]]:
    """The write, returning its detail with the process's CPU seconds it took."""

    def timed(data: Any, dest: str) -> dict[str, Any]:
        before = _process_cpu()
        detail = write(data, dest)
        return {"cpu_s": _process_cpu() - before, **(detail or {})}

    return timed


def dataferry_parts(result: Any) -> dict[str, float]:
    """A WriteResult's time cut into PARTS (seconds; thread-seconds for the tasks' sums)."""
    plan = result.stats.get("plan_s", {})
    tasks = [r for r in result.run.results.values() if r]
    parts = {
        "plan_split_s": plan.get("split_partitions", 0.0),
        "plan_measure_s": plan.get("measure", 0.0),
        "plan_other_s": max(
            0.0,
            plan.get("total", 0.0) - plan.get("split_partitions", 0.0) - plan.get("measure", 0.0),
        ),
        "split_s": sum(r.get("split_s", 0.0) for r in tasks),
        "encode_s": sum(r.get("encode_s", 0.0) for r in tasks),
        "setup_s": result.run.setup_s,
        "tasks_s": result.run.write_s - result.run.setup_s,
        "job_commit_s": result.run.job_commit_s,
    }
    return parts


def _group_for(spec: ProfileSpec, table: pa.Table) -> Group:
    cols = list(spec.partition_by)
    codec = spec.compression

    def dataferry_write(data: pa.Table, dest: str) -> dict[str, Any]:
        from ..dataset.write import write_dataset

        return dataferry_parts(write_dataset(data, dest, partition_by=cols, compression=codec))

    def pyarrow_write(data: pa.Table, dest: str) -> None:
        import pyarrow.dataset as pads

        options = pads.ParquetFileFormat().make_write_options(compression=codec)
        pads.write_dataset(
            data,
            dest,
            format="parquet",
            partitioning=cols,
            partitioning_flavor="hive",
            file_options=options,
        )

    def polars_prepare(data: pa.Table) -> Any:
        import polars as pl

        return pl.from_arrow(data)

    def polars_write(df: Any, dest: str) -> None:
        df.write_parquet(
            dest, partition_by=cols, compression="uncompressed" if codec == "none" else codec
        )

    def delta_write(data: pa.Table, dest: str) -> None:
        from deltalake import WriterProperties, write_deltalake

        name = "UNCOMPRESSED" if codec == "none" else codec.upper()
        props = WriterProperties(compression=name)  # type: ignore[arg-type]
        write_deltalake(dest, data, partition_by=cols, writer_properties=props)

    candidates = [
        ((), Writer("dataferry", _with_cpu(dataferry_write), warm=FERRY_MODULES)),
        (("polars",), Writer("polars", _with_cpu(polars_write), prepare=polars_prepare)),
        ((), Writer("pyarrow", _with_cpu(pyarrow_write), warm=("pyarrow.dataset",))),
        (
            ("deltalake",),
            Writer("deltalake", _with_cpu(delta_write), rows=delta_rows, warm=("deltalake",)),
        ),
    ]
    group = _group("table", "dataferry", candidates, ())
    group.data = table
    return group


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else 0.0


def run_write_profile(spec: ProfileSpec, progress: Progress | None = None) -> dict[str, Any]:
    """The profile: dataferry's parts (medians over the runs), and every writer's wall and
    CPU seconds at the same codec."""
    table = sales_table(spec.rows)
    group = _group_for(spec, table)
    steps = _Steps(progress, len(group.writers) * (spec.repeats + 1))
    failed: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="dataferry-bench-profile-") as base:
        try:
            rows = _measure(group, table.num_rows, spec.repeats, base, steps, failed, True)
        except Exception as e:  # pragma: no cover - a writer that breaks the process
            failed.append(_failure("profile", "table", e))
            rows = []
    writers = []
    parts: dict[str, float] = {}
    for r in rows:
        details = r.pop("run_details", [])
        cpu = _median([d["cpu_s"] for d in details])
        writers.append(
            {"writer": r["writer"], "wall_s": r["wall_s"], "cpu_s": cpu, "runs_s": r["runs_s"]}
        )
        if r["writer"] == "dataferry":
            for key, _ in PARTS[:-1]:
                parts[key] = _median([d[key] for d in details])
            walls = r["runs_s"]  # each run's wall, in the order of its details
            spent = [
                sum(d[k] for k in ("plan_split_s", "plan_measure_s", "plan_other_s"))
                + d["setup_s"]
                + d["tasks_s"]
                + d["job_commit_s"]
                for d in details
            ]
            parts["other_s"] = _median([max(0.0, w - s) for w, s in zip(walls, spent, strict=True)])
    fastest = min((w["wall_s"] for w in writers), default=0.0)
    base_wall = next((w["wall_s"] for w in writers if w["writer"] == "dataferry"), None)
    for w in writers:
        w["vs_dataferry"] = round(w["wall_s"] / base_wall, 3) if base_wall else None
        w["vs_fastest"] = round(w["wall_s"] / fastest, 3) if fastest else None
    return {
        "benchmark": "write",
        "mode": "profile",
        "spec": {**asdict(spec), "bytes": table.nbytes},
        "machine": machine_info(),
        "parts": [{"part": key, "label": label, "s": parts.get(key)} for key, label in PARTS],
        "writers": writers,
        "skipped": group.skipped,
        "failed": failed,
    }
