"""`dataferry demo`: the main job end to end, then the tour, rendered."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from .app import app
from .locations import need_directory
from .output import (
    JSON_OPT,
    QUIET_OPT,
    console,
    escape,
    ops_table,
    pairs,
    print_json,
    progress,
    table,
)

if TYPE_CHECKING:
    from ..demo import DemoReport


@app.command()
def demo(
    dest: str = typer.Option(
        None,
        help="Where to write; refused if it holds anything, unless --force "
        "(default: a temporary directory, removed at the end unless --keep).",
    ),
    rows: int = typer.Option(400_000, help="Rows of synthetic data."),
    tasks: int = typer.Option(16, help="Write tasks."),
    committer: str = typer.Option("auto", help="Committer name."),
    workers: int = typer.Option(None, help="Worker processes (default: one per core)."),
    tour: bool = typer.Option(
        True, help="Then commit the write with v1 and manifest on sim:hdfs-loaded, and shuffle."
    ),
    force: bool = typer.Option(
        False, "--force", help="Write into a --dest that holds data, replacing what it holds."
    ),
    keep: bool = typer.Option(
        False, "--keep", help="Keep the temporary output (default destination and tour)."
    ),
    json_out: bool = JSON_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """The main job (a partitioned write with a failed attempt and a speculative one), then the
    tour: the same write committed by v1 and by manifest on a loaded NameNode's model, and a
    small shuffle pulled and pushed."""
    from ..demo import run_demo

    if dest:
        need_directory(dest, "where the demo writes", "--dest")
    with progress("demo: tasks committed", tasks, json_out or quiet) as steps:

        def on_event(kind: str, task: int, attempt: int) -> None:
            if kind == "task_committed":
                steps.advance()

        report = run_demo(
            dest,
            rows=rows,
            tasks=tasks,
            committer=committer,
            workers=workers,
            on_event=on_event,
            tour=tour,
            force=force,
            keep=keep,
        )
    run = report.write.run
    if json_out:
        print_json(
            {
                "dest": report.dest,
                "committer": report.committer,
                "job_id": report.write.job_id,
                "rows_written": report.rows_written,
                "rows_read": report.rows_read,
                "files": report.write.files,
                "bytes": report.write.bytes,
                "partitions": report.write.partitions,
                "attempts": run.attempts,
                "failed_attempts": run.failed_attempts,
                "speculative_attempts": run.speculative_attempts,
                "denied_commits": run.denied_commits,
                "write_s": run.write_s,
                "job_commit_s": run.job_commit_s,
                "stages_s": run.commit.stage_seconds,
                "store_ops": run.store_stats.snapshot()["counters"],
                "commit_tour": report.commit_tour,
                "shuffle_tour": report.shuffle_tour,
                "kept": report.workdir,
            }
        )
        return
    _render(report, own_dest=bool(dest))


def _render(report: DemoReport, own_dest: bool) -> None:
    """The main job's summary, its commit stages and store operations, then the tour."""
    from ..demo import slowest_stage

    run = report.write.run
    rows = (
        ("destination", report.dest),
        ("committer", report.committer),
        ("job", report.write.job_id),
        ("rows written / read back", f"{report.rows_written:,} / {report.rows_read:,}"),
        ("files / partitions", f"{report.write.files} / {report.write.partitions}"),
        ("bytes", f"{report.write.bytes:,}"),
        (
            "attempts",
            f"{run.attempts} launched, {run.failed_attempts} failed (injected), "
            f"{run.speculative_attempts} speculative, {run.denied_commits} denied commit",
        ),
        ("write phase", f"{run.write_s:.3f} s"),
        ("job commit", f"{run.job_commit_s:.3f} s"),
        ("_SUCCESS", "JSON record" if report.success else "empty marker"),
    )
    console.print(pairs("dataferry demo", rows))
    stages = table("job commit stages", ("stage", "seconds"))
    for name, secs in run.commit.stage_seconds.items():
        stages.add_row(name, f"{secs:.4f}")
    console.print(stages)
    console.print(ops_table(run.store_stats, "store operations (driver and workers)"))
    console.print(f"[green]ok[/]: {report.rows_read:,} rows read back from {escape(report.dest)}")
    if report.commit_tour:
        t = table(
            "the same write (by day) committed on sim:hdfs-loaded, a loaded NameNode",
            ("committer", "files", "job commit s", "slowest stage"),
            left=("committer", "slowest stage"),
        )
        for r in report.commit_tour:
            stage, secs = slowest_stage(r["stages_s"])
            t.add_row(
                r["committer"], str(r["files"]), f"{r['job_commit_s']:.2f}", f"{stage} {secs:.2f} s"
            )
        console.print(t)
    if report.shuffle_tour:
        t = table(
            "a small shuffle by customer on two shuffle services",
            (
                "method",
                "rows",
                "wall s",
                "reduce reads",
                "of them by reference",
                "avg read KiB",
                "merged partitions",
            ),
        )
        for r in report.shuffle_tour:
            t.add_row(
                r["method"],
                f"{r['rows']:,}",
                f"{r['wall_s']:.2f}",
                str(r["reduce_reads"]),
                str(r["by_reference"]),
                f"{r['avg_read_bytes'] / 1024:.0f}",
                str(r["merged_partitions"]),
            )
        console.print(t)
    for note in report.notes:
        console.print(note, markup=False)
    if own_dest:  # the user's destination is theirs: only the tour's scratch output is temporary
        console.print(f"the job's output stays in {report.dest}", markup=False)
    if report.workdir:
        console.print(f"temporary output kept in {report.workdir}", markup=False)
    elif own_dest:
        console.print("the tour's temporary output removed (--keep keeps it)", markup=False)
    else:
        console.print("temporary output removed (--keep keeps it)", markup=False)
