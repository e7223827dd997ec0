"""Benchmarks of the two services: `bench markers` and `bench shuffle`."""

from __future__ import annotations

import typer

from .app import bench_app
from .output import JSON_OPT, QUIET_OPT, console, print_json, progress, table


@bench_app.command("markers")
def bench_markers(
    tasks: int = typer.Option(240, help="Tasks, all running at once."),
    files: int = typer.Option(24_000, help="Data files in the job."),
    store: str = typer.Option("sim:s3", help="A store model, sim:PROFILE."),
    file_size: int = typer.Option(64 * 1024, help="Bytes per data file."),
    json_out: bool = JSON_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """The same write job with direct markers and with the marker service."""
    from ..bench.markers import MarkersBenchSpec, run_markers_bench

    spec = MarkersBenchSpec(tasks=tasks, files=files, store=store, file_size=file_size)
    with progress("bench markers", 2, json_out or quiet) as steps:
        data = run_markers_bench(spec, progress=steps.step)
    if json_out:
        print_json(data)
        return
    t = table(
        f"bench markers: {files} files from {tasks} tasks on {store}",
        ("markers", "marker requests", "marker files", "marker s (all tasks)", "write s"),
    )
    for r in data["results"]:
        t.add_row(
            r["markers"],
            str(r["marker_ops"]),
            str(r["marker_files"]),
            f"{r['marker_s']:.1f}",
            f"{r['write_s']:.2f}",
        )
    console.print(t)
    console.print(
        f"marker requests {data['marker_ops_ratio']}x fewer with the service; "
        f"total write time {data['write_time_reduction'] * 100:.1f}% less"
    )


@bench_app.command("shuffle")
def bench_shuffle(
    size: str = typer.Option(
        "1GiB", help="Data to shuffle (e.g. 256MiB, 1GiB); several, comma-separated, for a curve."
    ),
    maps: int = typer.Option(100, help="Map tasks (input partitions)."),
    reduces: int = typer.Option(200, help="Reduce partitions."),
    workers: int = typer.Option(2, help="Dask workers, and embedded-engine nodes and workers."),
    repeats: int = typer.Option(1, help="Runs of each method, alternating; medians compared."),
    engine: list[str] = typer.Option(["dask", "local"], help="dask and/or local."),
    methods: str = typer.Option(
        "pull,push,dask-p2p,dask-tasks",
        help="Comma-separated: pull, push, push-sync (push before the map returns), "
        "dask-p2p, dask-tasks.",
    ),
    hold: bool = typer.Option(
        True,
        help="Dask: persist the input first and the output (--no-hold: the maps generate the "
        "input and the output is counted, so memory is the shuffle's own).",
    ),
    json_out: bool = JSON_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """Pull, push (merged), Dask p2p and Dask tasks shuffling the same data, side by side."""
    from ..bench.shuffle import ShuffleBenchSpec, run_shuffle_bench, run_shuffle_scale
    from ..units import parse_size

    sizes = [parse_size(s) for s in size.split(",")]
    spec = ShuffleBenchSpec(
        size=sizes[0],
        maps=maps,
        reduces=reduces,
        workers=workers,
        repeats=repeats,
        engines=tuple(engine),
        methods=tuple(m.strip() for m in methods.split(",") if m.strip()),
        hold=hold,
    )
    with progress("bench shuffle", None, json_out or quiet) as steps:
        if len(sizes) > 1:
            data = run_shuffle_scale(spec, sizes, progress=steps.step)
        else:
            data = run_shuffle_bench(spec, progress=steps.step)
    if json_out:
        print_json(data)
        return
    for run in data.get("runs", [data]):
        _print_shuffle_run(run)
    if "scale" in data:
        console.print(shuffle_scale_table(data["scale"]))


def _print_shuffle_run(data: dict) -> None:
    spec = data["spec"]
    t = table(
        f"bench shuffle: {_size(spec['size'])} in {spec['maps']} maps x "
        f"{spec['reduces']} reduces (~{spec['avg_block_bytes'] // 1024} KiB blocks)",
        (
            "engine",
            "method",
            "wall s",
            "MB/s",
            "reads/reduce",
            "avg read KiB",
            "merged/by ref/original",
            "CPU s",
            "CPU s/GiB",
            "peak MiB",
        ),
        left=("engine", "method"),
    )
    for r in data["results"]:
        procs = r.get("processes", {})
        reads = r.get("reads")
        t.add_row(
            r["engine"],
            r["method"],
            f"{r['wall_s']:.2f}",
            f"{r['mb_s']:.0f}",
            f"{reads['per_reduce']:.1f}" if reads else "-",
            f"{r['avg_read_bytes'] / 1024:.1f}" if r["avg_read_bytes"] else "-",
            _read_sources(reads) if reads else "-",
            f"{r['cpu_s']:.1f}" if procs else "-",
            f"{r['cpu_s_per_gib']:.1f}" if procs else "-",
            f"{max(p['peak_rss_mib'] for p in procs.values()):.0f}" if procs else "-",
        )
    console.print(t)
    profiled = [r for r in data["results"] if r.get("profile")]
    if profiled:
        console.print(shuffle_profile_table(profiled))
    summary = ", ".join(f"{k} {v}" for k, v in data["summary"].items())
    console.print(
        f"disk floor (write + fdatasync {data['disk_limit_s']:.2f} s, read once "
        f"{data['disk_read_s']:.2f} s): {data['floor_s']:.2f} s; {summary}",
        markup=False,
    )
    console.print(
        "reads/reduce: every read a reducer made (a merged partition of stubs is one read, "
        "and each block it names another); merged/by ref/original: blocks read as bytes of "
        "a merged chunk, from map outputs named by stubs, fetched from map outputs",
        markup=False,
    )


def _read_sources(reads: dict) -> str:
    """Blocks by where a reducer read them: in merged chunks, by reference, original."""
    return f"{reads['merged_in_place']}/{reads['ref_reads']}/{reads['original_reads']}"


def shuffle_profile_table(results: list[dict]):
    """Where each Dask method's time went: stages, phases inside the tasks, CPU by role."""
    from ..bench.shuffle_profile import PROFILE_COLUMNS, profile_rows

    t = table("where the time went (Dask)", PROFILE_COLUMNS, left=("method", "stage"))
    for row in profile_rows(results):
        t.add_row(*row)
    return t


def shuffle_scale_table(rows: list[dict]):
    from ..bench.shuffle_profile import SCALE_COLUMNS, scale_rows

    t = table(
        "bench shuffle: scale (time per GiB and peak memory per process against size)",
        SCALE_COLUMNS,
        left=("engine", "method"),
    )
    for row in scale_rows(rows):
        t.add_row(*row)
    return t


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"
