"""`bench write` (dataferry beside the writers users pick) and `bench report` (the suite, as a
page with plots)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import typer
from rich.text import Text

from ..errors import ConfigError
from .app import bench_app
from .locations import need_directory
from .output import JSON_OPT, QUIET_OPT, console, names, print_json, progress, table

MIB = 1 << 20


@bench_app.command("write")
def bench_write(
    rows: int = typer.Option(3_000_000, help="Rows of generated data (table mode)."),
    tasks: int = typer.Option(None, help="dataferry write tasks (default: write_dataset's)."),
    repeats: int = typer.Option(
        None,
        help="Runs of each writer, alternating; medians compared (default 5; 1 with --stream).",
    ),
    writers: str = typer.Option(
        "", help="Comma-separated writers to run (default: every installed one)."
    ),
    stream: str = typer.Option(
        None,
        "--stream",
        help="Stream mode: write a generated stream of RecordBatches of this in-memory size "
        "(e.g. 1GiB), each writer in its own process, and report peak RSS.",
    ),
    partitions: int = typer.Option(40, help="Partitions of the stream (--stream)."),
    batch_rows: int = typer.Option(65_536, help="Rows per RecordBatch of the stream (--stream)."),
    max_memory: str = typer.Option(
        None, help="write_dataset's max_memory for the stream (e.g. 256MiB), if it takes one."
    ),
    dask: bool = typer.Option(
        False, "--dask", help="Also Dask's to_parquet vs dataferry's, on a LocalCluster."
    ),
    ray: bool = typer.Option(
        False, "--ray", help="Also Ray Data's write_parquet vs dataferry's CommitDatasink."
    ),
    profile: bool = typer.Option(
        False,
        "--profile",
        help="Where dataferry's write time goes (plan, split, encode, commit), next to "
        "polars, pyarrow and Delta Lake at one codec (--compression).",
    ),
    compression: str = typer.Option(
        "snappy", help="The codec every writer uses with --profile (snappy, zstd, lz4, none)."
    ),
    codecs: str = typer.Option(
        "default,snappy,zstd-3",
        help="Codecs the in-memory writers run at, interleaved in one run: 'default' (each "
        "writer's own) and codecs every writer is told to use, with an optional level "
        "(snappy, zstd-3, lz4, gzip, none).",
    ),
    json_out: bool = JSON_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """dataferry beside the writers users pick (pyarrow, polars, DuckDB, Delta Lake; Dask and
    Ray with --dask/--ray), on an in-memory table or, with --stream, a stream of batches."""
    from ..bench.write import StreamBenchSpec, WriteBenchSpec, run_stream_bench, run_write_bench
    from ..units import parse_size

    if profile:
        from ..bench.write_profile import ProfileSpec, run_write_profile

        if stream is not None or dask or ray:
            raise ConfigError("--profile runs on the in-memory table in this process alone")
        spec_p = ProfileSpec(rows=rows, compression=compression, repeats=repeats or 3)
        with progress("bench write --profile", None, json_out or quiet) as steps:
            found = run_write_profile(spec_p, progress=steps.starting)
        print_json(found) if json_out else render_profile(found)
        if found["failed"]:
            raise typer.Exit(1)
        return
    if stream is not None:
        if dask or ray:
            raise ConfigError("--dask and --ray run on the in-memory table, not --stream")
        spec: Any = StreamBenchSpec(
            size=parse_size(stream),
            partitions=partitions,
            batch_rows=batch_rows,
            repeats=repeats or 1,
            max_memory=parse_size(max_memory) if max_memory else None,
            writers=names(writers),
        )
        run: Any = run_stream_bench
    else:
        spec = WriteBenchSpec(
            rows=rows,
            tasks=tasks,
            repeats=repeats or 5,
            writers=names(writers),
            dask=dask,
            ray=ray,
            codecs=names(codecs),
        )
        run = run_write_bench
    with progress("bench write", None, json_out or quiet) as steps:
        data = run(spec, progress=steps.starting)
    if json_out:
        print_json(data)
    else:
        _render_write(data)
    if data["failed"]:
        raise typer.Exit(1)


def _render_write(data: dict[str, Any]) -> None:
    streaming = data["mode"] == "stream"
    sp = data["spec"]
    if streaming:
        title = (
            f"bench write --stream: {sp['bytes'] / MIB:,.0f} MiB in {sp['batches']:,} batches "
            f"of {sp['batch_rows']:,} rows into {sp['partitions']} partitions, each writer "
            f"in its own process (median of {sp['repeats']})"
        )
        cols = ["writer", "wall s", "runs s", "spread", "x dataferry", "peak RSS MiB"]
        cols += ["start RSS MiB"]
        cols += ["files", "file KiB min / median / max"]
    else:
        title = (
            f"bench write: {sp['rows']:,} rows ({sp['bytes'] / MIB:,.0f} MiB in memory), "
            f"partitioned by {', '.join(sp['partition_by'])} (median of {sp['repeats']} "
            "after a warm-up, order rotated)"
        )
        cols = ["writer", "engine", "codec", "wall s", "runs s", "spread", "x dataferry"]
        cols += ["CPU s", "cores", "files", "MiB"]
    t = table(title, (*cols, "note"), left=("writer", "engine", "note"))
    for r in data["results"]:
        ratio = f"{r['vs_dataferry']:.2f}" if r["vs_dataferry"] else "-"
        runs = ", ".join(f"{x:.2f}" for x in r["runs_s"])
        spread = f"±{r['spread_pct'] / 2:.1f}%"
        if streaming:
            fb = r["file_bytes"]
            cells = [
                f"{r['wall_s']:.2f}",
                runs,
                spread,
                ratio,
                f"{r['rss_peak_bytes'] / MIB:,.0f}",
                f"{r['rss_start_bytes'] / MIB:,.0f}",
                f"{r['files']:,}",
                " / ".join(f"{fb[k] / 1024:,.0f}" for k in ("min", "median", "max")),
            ]
        else:
            cells = [
                r["group"],
                r.get("codec", "default"),
                f"{r['wall_s']:.3f}",
                runs,
                spread,
                ratio,
                f"{r['cpu_s']:.2f}" if r.get("cpu_s") is not None else "-",
                f"{r['cores']:.2f}" if r.get("cores") is not None else "-",
                f"{r['files']:,}",
                f"{r['bytes'] / MIB:,.1f}",
            ]
        t.add_row(r["writer"], *cells, str(r["detail"] or ""))
    console.print(t)
    if data.get("ratio"):
        console.print(f"dataferry / pyarrow direct write: {data['ratio']:.2f}x")
    dim = [
        "x dataferry: a writer's median over that of the dataferry writer on the same "
        "engine (dataferry, dataferry.dask, dataferry.ray) at the same codec; spread: "
        "(slowest - fastest run) / 2, over the median",
        *(
            []
            if streaming
            else [
                "CPU s: the process's user + system seconds during the write (all threads; "
                "median of the runs); cores: CPU s over wall s, the median of the runs' "
                f"(of {data['machine'].get('cpus', '?')} on this machine)"
            ]
        ),
        *data["notes"],
    ]
    if streaming:
        dim.append(data["rss_method"])
    for line in dim:
        console.print(line, style="dim", markup=False)
    for s in data["skipped"]:
        console.print(Text.assemble(("skipped", "yellow"), f" {s['writer']}: {s['reason']}"))
    for f in data["failed"]:
        line = f" {f['writer']} ({f['group']}): {f['reason']}"
        console.print(Text.assemble(("failed", "bold red"), line))


def render_profile(data: dict[str, Any]) -> None:
    """The profile's two tables: dataferry's parts, and every writer's wall and CPU."""
    sp = data["spec"]
    walls = {w["writer"]: w["wall_s"] for w in data["writers"]}
    wall = walls.get("dataferry") or 0.0
    t = table(
        f"where dataferry's write goes: {sp['rows']:,} rows, partitioned by "
        f"{', '.join(sp['partition_by'])}, {sp['compression']} (median of {sp['repeats']})",
        ("part", "s", "of wall"),
        left=("part",),
    )
    for p in data["parts"]:
        if p["s"] is None:
            continue
        share = f"{100 * p['s'] / wall:.0f}%" if wall and "thread-s" not in p["label"] else "-"
        t.add_row(p["label"], f"{p['s']:.3f}", share)
    console.print(t)
    w = table(
        f"every writer at {sp['compression']}, in this process",
        ("writer", "wall s", "runs s", "CPU s", "x dataferry", "x fastest"),
        left=("writer",),
    )
    for r in data["writers"]:
        w.add_row(
            r["writer"],
            f"{r['wall_s']:.3f}",
            ", ".join(f"{x:.2f}" for x in r["runs_s"]),
            f"{r['cpu_s']:.2f}",
            f"{r['vs_dataferry']:.2f}" if r["vs_dataferry"] else "-",
            f"{r['vs_fastest']:.2f}" if r["vs_fastest"] else "-",
        )
    console.print(w)
    console.print(
        "thread-s: summed over the tasks' threads (they run side by side); CPU s: the "
        "process's user + system seconds during the write, all threads",
        style="dim",
        markup=False,
    )
    for s in data["skipped"]:
        console.print(Text.assemble(("skipped", "yellow"), f" {s['writer']}: {s['reason']}"))
    for f in data["failed"]:
        console.print(Text.assemble(("failed", "bold red"), f" {f['writer']}: {f['reason']}"))


@bench_app.command("report")
def bench_report(
    out: str = typer.Option(
        None,
        "--out",
        help="Where to write: the page is <OUT>.md, its plots and JSON go in <OUT>/ "
        "(default: a new temporary directory; the command says where).",
    ),
    quick: bool = typer.Option(False, help="Tiny sizes (seconds): for trying it out."),
    only: str = typer.Option(
        "",
        help="Comma-separated sections to run again (commit, plan, markers, shuffle, write); "
        "the others come from the report.json already in --out.",
    ),
    quiet: bool = QUIET_OPT,
) -> None:
    """Run the benchmark suite and write a page (Markdown) with tables and plots."""
    from ..bench.report import ReportSpec, run_report

    if out:  # refused before the suite runs, not when its first plot is written
        need_directory(out, "the report's plots and JSON go in <OUT>/", "--out")
    out = out or os.path.join(tempfile.mkdtemp(prefix="dataferry-report-"), "benchmarks")
    with progress("bench report", None, quiet) as steps:
        sections = tuple(x.strip() for x in only.split(",") if x.strip())
        data = run_report(ReportSpec(out=out, quick=quick, only=sections), progress=steps.step)
    console.print(
        f"wrote {out}.md and its plots and JSON in {out}{os.sep} in {data['seconds']} s",
        markup=False,
    )
