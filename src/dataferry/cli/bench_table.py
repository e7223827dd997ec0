"""`bench table`: dataferry's table committers beside each format's own writers; `--frame zoo`:
the same on the type zoo, with every reader's verdict; `--concurrency`: many processes
appending to one table at once."""

from __future__ import annotations

from typing import Any

import typer
from rich.text import Text

from ..commit.table.registry import format_names
from .app import bench_app
from .output import JSON_OPT, QUIET_OPT, console, names, print_json, progress, table

MIB = 1 << 20
QUICK = {"rows": 20_000, "repeats": 1, "processes": 2, "commits": 2}
FRAMES = ("sales", "zoo")


@bench_app.command("table")
def bench_table(
    rows: int = typer.Option(
        None, help="Rows of the frame (default 3,000,000 of sales; 500,000 of the zoo)."
    ),
    repeats: int = typer.Option(None, help="Timed runs of each writer, alternating (default 3)."),
    engines: str = typer.Option(
        "", help="Comma-separated engines to run: embedded, dask, ray (default: all)."
    ),
    formats: str = typer.Option(
        "",
        help=f"Comma-separated table formats: {', '.join(format_names())} (default: all).",
    ),
    frame: str = typer.Option(
        "sales",
        help="The frame: sales (the bench's sales table, every engine) or zoo (the type zoo, "
        "embedded engine: wall time, files and every reader's verdict beside the format's "
        "own writer).",
    ),
    concurrency: bool = typer.Option(
        False,
        "--concurrency",
        help="Instead: processes appending at once to one Delta, one Iceberg and one Hudi table.",
    ),
    processes: int = typer.Option(None, help="Appending processes (--concurrency; default 10)."),
    commits: int = typer.Option(
        None, help="Append commits per process (--concurrency; default 20)."
    ),
    quick: bool = typer.Option(
        False, help="Tiny sizes (20k rows, 1 run; 2 processes x 2 commits): for trying it out."
    ),
    json_out: bool = JSON_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """Delta, Iceberg and Hudi tables written by dataferry (embedded engine, Dask, Ray) beside
    deltalake, pyiceberg and Ray's write_iceberg; with --frame zoo, on the type zoo, with each
    reader's verdict on each table; with --concurrency, concurrent appenders."""
    from ..bench.table import FORMATS, TableBenchSpec, run_table_bench
    from ..bench.table_concurrency import ConcurrencySpec, run_concurrency_bench
    from ..bench.table_zoo import ZooBenchSpec, run_zoo_bench
    from ..errors import ConfigError

    if frame not in FRAMES:
        raise ConfigError(f"unknown frame {frame!r}; choose from {', '.join(FRAMES)}")
    if frame == "zoo" and (concurrency or names(engines) not in ((), ("embedded",))):
        raise ConfigError("--frame zoo runs on the embedded engine alone, without --concurrency")

    sizes = {
        "rows": rows,
        "repeats": repeats,
        "processes": processes,
        "commits": commits,
    }
    sizes = {k: v for k, v in sizes.items() if v is not None}
    if quick:
        sizes = {**QUICK, **sizes}
    chosen = names(formats)
    if concurrency:
        spec: Any = ConcurrencySpec(
            processes=sizes.get("processes", 10),
            commits=sizes.get("commits", 20),
            **({"formats": chosen} if chosen else {}),
        )
        run: Any = run_concurrency_bench
    elif frame == "zoo":
        spec = ZooBenchSpec(
            rows=sizes.get("rows", 500_000),
            repeats=sizes.get("repeats", 3),
            formats=chosen or FORMATS,
        )
        run = run_zoo_bench
    else:
        spec = TableBenchSpec(
            rows=sizes.get("rows", 3_000_000),
            repeats=sizes.get("repeats", 3),
            formats=chosen or FORMATS,
            **({"engines": names(engines)} if engines else {}),
        )
        run = run_table_bench
    with progress("bench table", None, json_out or quiet) as steps:
        data = run(spec, progress=steps.starting)
    if json_out:
        print_json(data)
    elif concurrency:
        _render_concurrency(data)
    elif frame == "zoo":
        _render_zoo(data)
    else:
        _render_table(data)
    ours = [r for r in data["results"] if r.get("writer", "dataferry") == "dataferry"]
    if concurrency and (data["failed"] or not all(r["ok"] for r in ours)):
        raise typer.Exit(1)


def _tail(data: dict[str, Any], legend: list[str]) -> None:
    for line in [*legend, *data["notes"]]:
        console.print(line, style="dim", markup=False)
    for s in data["skipped"]:
        console.print(
            Text.assemble(("skipped", "yellow"), f" {s['writer']} ({s['group']}): {s['reason']}")
        )
    for f in data["failed"]:
        line = f" {f['writer']} ({f['group']}): {f['reason']}"
        console.print(Text.assemble(("failed", "bold red"), line))


def _render_table(data: dict[str, Any]) -> None:
    sp = data["spec"]
    title = (
        f"bench table: {sp['rows']:,} rows ({sp['bytes'] / MIB:,.0f} MiB in memory), "
        f"partitioned by {', '.join(sp['partition_by'])} (median of {sp['repeats']}, "
        "after a warm-up)"
    )
    cols = ("writer", "format", "engine", "wall s", "runs s", "spread", "x fastest")
    cols += ("job commit s", "commit % of write", "files", "MiB")
    t = table(title, cols, left=("writer", "format", "engine"))
    for r in data["results"]:
        t.add_row(
            r["writer"],
            r["format"],
            r["group"],
            f"{r['wall_s']:.3f}",
            ", ".join(f"{x:.2f}" for x in r["runs_s"]),
            f"±{r['spread_pct'] / 2:.1f}%",
            f"{r['vs_fastest']:.2f}" if r["vs_fastest"] else "-",
            f"{r['job_commit_s']:.3f}" if r["job_commit_s"] is not None else "-",
            f"{r['job_commit_pct']:.1f}%" if r["job_commit_pct"] is not None else "-",
            f"{r['files']:,}",
            f"{r['bytes'] / MIB:,.1f}",
        )
    console.print(t)
    _tail(
        data,
        [
            "x fastest: a writer's median over that of the fastest single-process writer of "
            "its format (deltalake for Delta, pyiceberg for Iceberg); spread: (max - min) / 2 "
            "of the runs, over the median; commit % of write: the job commit (the table "
            "transaction and marker cleanup) over the run's wall time, median of the runs"
        ],
    )


def _render_concurrency(data: dict[str, Any]) -> None:
    sp = data["spec"]
    title = (
        f"bench table --concurrency: {sp['processes']} processes x {sp['commits']} append "
        f"commits of {sp['rows']} rows into one table"
    )
    cols = (
        "format",
        "writer",
        "commits landed",
        "rows found",
        "distinct ids",
        "wall s",
        "commits/s",
    )
    cols += ("job commit median s", "max s", "errors", "ok")
    t = table(title, cols)
    for r in data["results"]:
        t.add_row(
            r["format"],
            r.get("writer", "dataferry"),
            f"{r['commits_landed']:,} / {r['commits_expected']:,}",
            f"{r['rows_found']:,} / {r['rows_expected']:,}",
            f"{r['distinct_ids']:,}",
            f"{r['wall_s']:.2f}" if r["wall_s"] is not None else "-",
            f"{r['commits_per_s']:.1f}" if r["commits_per_s"] else "-",
            f"{r['job_commit_median_s']:.3f}" if r["job_commit_median_s"] is not None else "-",
            f"{r['job_commit_max_s']:.3f}" if r["job_commit_max_s"] is not None else "-",
            str(r["error_count"]),
            "yes" if r["ok"] else "NO",
        )
    console.print(t)
    errors = [
        f"{r['format']} {r.get('writer', 'dataferry')}: {e}"
        for r in data["results"]
        for e in r["errors"][:3]
    ]
    _tail(data, errors)


MARKS = {"same": "ok", "differs": "DIFFERS", "fails": "FAILS"}


def _readers_cell(readers: list[dict[str, str]]) -> str:
    """One line per reader: ok, DIFFERS or FAILS (the details are listed under the table)."""
    return "\n".join(f"{r['reader']} {MARKS[r['status']]}" for r in readers) or "-"


def _render_zoo(data: dict[str, Any]) -> None:
    sp = data["spec"]
    title = (
        f"bench table --frame zoo: {sp['rows']:,} rows of the type zoo "
        f"({sp['bytes'] / MIB:,.0f} MiB in memory), partitioned by "
        f"{', '.join(sp['partition_by'])}, embedded engine (median of {sp['repeats']}, "
        "after a warm-up)"
    )
    cols = ("format", "writer", "wall s", "runs s", "spread", "x own writer", "files", "MiB")
    cols += ("refused", "readers")
    t = table(title, cols, left=("format", "writer", "refused", "readers"))
    for r in data["results"]:
        t.add_row(
            r["format"],
            r["writer"],
            f"{r['wall_s']:.3f}",
            ", ".join(f"{x:.2f}" for x in r["runs_s"]),
            f"±{r['spread_pct'] / 2:.1f}%",
            f"{r['vs_peer']:.2f}" if r["vs_peer"] else "-",
            f"{r['files']:,}",
            f"{r['bytes'] / MIB:,.1f}",
            ", ".join(x["column"] for x in r["refused"]) or "-",
            _readers_cell(r["readers"]),
        )
    console.print(t)
    legend = [
        "x own writer: a writer's median over that of the format's own Python writer "
        "(deltalake, pyiceberg); readers: each reader of the format on the writer's table, ok "
        "when it gives the same rows and values as the format's own writer's table read by "
        "the format's own library (the input frame where the format has no Python writer)"
    ]
    for f in data["formats"]:
        n = len(f["columns"]) + len(f["left_out"])
        line = f"{f['format']}: compared on {len(f['columns'])} of {n} columns"
        if f["left_out"]:
            out = "; ".join(
                f"{x['column']} (refused by {', '.join(x['refused_by'])})" for x in f["left_out"]
            )
            line += f", left out of every writer's frame: {out}"
        line += f"; expected: {f['expected_from']}"
        if f["peer_changed"]:
            line += f"; its values differ from the input's in {', '.join(f['peer_changed'])}"
        legend.append(line)
    refusals = [
        f"{r['writer']} refuses {x['column']}: {x['reason']}"
        for r in data["results"]
        for x in r["refused"]
    ]
    verdicts = [
        f"{r['writer']} read by {x['reader']}: {MARKS[x['status']]}: {x['detail']}"
        for r in data["results"]
        for x in r["readers"]
        if x["detail"]
    ]
    _tail(data, legend + refusals + verdicts)
