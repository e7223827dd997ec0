"""The `dataferry` command: parse, call the library, render with rich. No logic of its own."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .errors import DataferryError
from .stats import IOStatistics

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="dataferry: safe, fast output commit for Python data engines.",
)
verify_app = typer.Typer(no_args_is_help=True, help="Check committers and stores by experiment.")
app.add_typer(verify_app, name="verify")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks, side by side in one run.")
app.add_typer(bench_app, name="bench")
markers_app = typer.Typer(no_args_is_help=True, help="Write markers and the marker service.")
app.add_typer(markers_app, name="markers")
plan_app = typer.Typer(no_args_is_help=True, help="Predict commit cost at sizes past one machine.")
app.add_typer(plan_app, name="plan")
shuffle_app = typer.Typer(no_args_is_help=True, help="The push-based shuffle service.")
app.add_typer(shuffle_app, name="shuffle")
uploads_app = typer.Typer(
    no_args_is_help=True, help="Multipart uploads left pending (billed until aborted)."
)
app.add_typer(uploads_app, name="uploads")
catalog_app = typer.Typer(no_args_is_help=True, help="The partition catalog of Hive-style tables.")
app.add_typer(catalog_app, name="catalog")

console = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True)

JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated option ("v1, manifest") as its names."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


@contextmanager
def _errors() -> Iterator[None]:
    """Library errors become one red line and exit code 2, not a traceback."""
    try:
        yield
    except DataferryError as e:
        err.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(2) from None
    except (FileNotFoundError, PermissionError) as e:
        err.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(2) from None


@contextmanager
def _progress(label: str, total: int | None, quiet: bool) -> Iterator[Callable[..., None]]:
    """A rich progress bar; yields a callback advance(n=1, total=None, label=None,
    completed=None) (a new label names the step running; completed sets the count)."""
    if quiet or (not sys.stderr.isatty() and not console.is_terminal):
        yield lambda *a, **k: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)

        def advance(
            n: int = 1,
            total: int | None = None,
            label: str | None = None,
            completed: int | None = None,
        ) -> None:
            if total is not None or label is not None or completed is not None:
                bar.update(task, total=total, description=label, completed=completed)
            if n:
                bar.advance(task, n)

        yield advance


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _ops_table(stats: IOStatistics, title: str) -> Table:
    t = Table(title=title)
    for col in ("operation", "count", "failures", "mean ms", "max ms", "total s"):
        t.add_column(col, justify="left" if col == "operation" else "right")
    for row in stats.durations("op_"):
        t.add_row(
            row.name,
            str(row.count),
            str(row.failures),
            f"{row.mean_s * 1000:.3f}",
            f"{row.max_s * 1000:.3f}",
            f"{row.total_s:.3f}",
        )
    return t


# --- demo ----------------------------------------------------------------------------------------


@app.command()
def demo(
    dest: str = typer.Option(None, help="Where to write (default: a new temporary directory)."),
    rows: int = typer.Option(400_000, help="Rows of synthetic data."),
    tasks: int = typer.Option(16, help="Write tasks."),
    committer: str = typer.Option("auto", help="Committer name."),
    workers: int = typer.Option(None, help="Worker processes (default: one per core)."),
    tour: bool = typer.Option(
        True, help="Then commit the write with v1 and manifest on sim:hdfs-loaded, and shuffle."
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """The main job (a partitioned write with a failed attempt and a speculative one), then the
    tour: the same write committed by v1 and by manifest on a loaded NameNode's model, and a
    small shuffle pulled and pushed."""
    from .demo import run_demo

    with _errors(), _progress("writing", tasks, json_out) as advance:

        def on_event(kind: str, task: int, attempt: int) -> None:
            if kind == "task_committed":
                advance()

        report = run_demo(
            dest,
            rows=rows,
            tasks=tasks,
            committer=committer,
            workers=workers,
            on_event=on_event,
            tour=tour,
        )
    run = report.write.run
    if json_out:
        _print_json(
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
            }
        )
        return
    summary = Table(title="dataferry demo", show_header=False)
    summary.add_column(style="bold")
    summary.add_column()
    for k, v in (
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
    ):
        summary.add_row(k, str(v))
    console.print(summary)
    stages = Table(title="job commit stages")
    stages.add_column("stage")
    stages.add_column("seconds", justify="right")
    for name, secs in run.commit.stage_seconds.items():
        stages.add_row(name, f"{secs:.4f}")
    console.print(stages)
    console.print(_ops_table(run.store_stats, "store operations (driver and workers)"))
    console.print(f"[green]ok[/]: {report.rows_read:,} rows read back from {report.dest}")
    if report.commit_tour:
        t = Table(title="the same write (by day) committed on sim:hdfs-loaded, a loaded NameNode")
        for col in ("committer", "files", "job commit s", "slowest stage"):
            t.add_column(col, justify="left" if col in ("committer", "slowest stage") else "right")
        for r in report.commit_tour:
            stage = max(
                ((k, v) for k, v in r["stages_s"].items() if k != "total"),
                key=lambda kv: kv[1],
                default=("", 0.0),
            )
            t.add_row(
                r["committer"],
                str(r["files"]),
                f"{r['job_commit_s']:.2f}",
                f"{stage[0]} {stage[1]:.2f} s",
            )
        console.print(t)
    if report.shuffle_tour:
        t = Table(title="a small shuffle by customer on two shuffle services")
        for col in (
            "method",
            "rows",
            "wall s",
            "reduce reads",
            "avg read KiB",
            "merged partitions",
        ):
            t.add_column(col, justify="left" if col == "method" else "right")
        for r in report.shuffle_tour:
            t.add_row(
                r["method"],
                f"{r['rows']:,}",
                f"{r['wall_s']:.2f}",
                str(r["reduce_reads"]),
                f"{r['avg_read_bytes'] / 1024:.0f}",
                str(r["merged_partitions"]),
            )
        console.print(t)
        console.print(f"tour output under {report.dest.rstrip('/')}-tour")


# --- success -------------------------------------------------------------------------------------


@app.command()
def success(
    path: str = typer.Argument(..., help="A destination directory or a _SUCCESS file."),
    json_out: bool = JSON_OPT,
) -> None:
    """Show and validate a _SUCCESS file: an empty legacy marker or a JSON summary."""
    from .commit.success import load_success

    with _errors():
        marker = load_success(path)
    if marker.data is None:
        if json_out:
            _print_json({"path": path, "legacy": True})
        else:
            console.print(
                f"{path}: empty _SUCCESS (classic FileOutputCommitter marker, no details)"
            )
        return
    data = marker.data.to_json()
    if json_out:
        _print_json(data)
        return
    t = Table(title=f"_SUCCESS at {path}", show_header=False)
    t.add_column(style="bold")
    t.add_column()
    for key in (
        "committer",
        "jobId",
        "jobIdSource",
        "success",
        "state",
        "stage",
        "date",
        "hostname",
    ):
        if data.get(key) is not None:
            t.add_row(key, str(data[key]))
    t.add_row("files listed", f"{len(data['filenames'])} (at most 100 are listed)")
    console.print(t)
    if data["metrics"]:
        m = Table(title="metrics")
        m.add_column("name")
        m.add_column("value", justify="right")
        for k, v in data["metrics"].items():
            m.add_row(k, str(v))
        console.print(m)
    if data["diagnostics"]:
        d = Table(title="diagnostics")
        d.add_column("name")
        d.add_column("value")
        for k, v in data["diagnostics"].items():
            d.add_row(k, str(v)[:200])
        console.print(d)
    stats = IOStatistics(data.get("iostatistics") or {})
    if stats.durations():
        console.print(_ops_table(stats, "I/O statistics"))


# --- manifest ------------------------------------------------------------------------------------


@app.command()
def manifest(
    path: str = typer.Argument(..., help="A task manifest file, or a directory of them."),
    files: int = typer.Option(10, help="How many file entries to show per manifest."),
    json_out: bool = JSON_OPT,
) -> None:
    """Show and validate task manifests (ours or Hadoop's manifest committer's)."""
    from .commit.manifest.files import load_manifest_file, manifest_files_in

    with _errors():
        found = [(p, *load_manifest_file(p)) for p in manifest_files_in(path)]
    if json_out:
        _print_json(
            [
                {
                    "path": p,
                    "bytes": size,
                    "jobId": m.job_id,
                    "taskID": m.task_id,
                    "taskAttemptID": m.task_attempt_id,
                    "files": len(m.files),
                    "totalSize": m.total_size,
                    "directories": len(m.directories),
                    "entries": [
                        {"s": f.source, "d": f.dest, "z": f.size, "e": f.etag} for f in m.files
                    ],
                }
                for p, m, size in found
            ]
        )
        return
    if not found:
        err.print(f"no manifests (*-manifest.json) in {path}")
        raise typer.Exit(1)
    for p, m, size in found:
        t = Table(title=f"manifest {p}", show_header=False)
        t.add_column(style="bold")
        t.add_column()
        for k, v in (
            ("job", m.job_id),
            ("task / attempt", f"{m.task_id} / {m.task_attempt_id}"),
            ("attempt directory", m.task_attempt_dir),
            ("files / bytes", f"{len(m.files)} / {m.total_size:,}"),
            ("directories", str(len(m.directories))),
            ("manifest size", f"{size:,} bytes"),
        ):
            t.add_row(k, v)
        console.print(t)
        if m.files and files > 0:
            ft = Table()
            for col in ("destination", "size", "etag"):
                ft.add_column(col)
            for f in m.files[:files]:
                ft.add_row(f.dest, f"{f.size:,}", f.etag or "")
            console.print(ft)


# --- check-store ---------------------------------------------------------------------------------


@app.command("check-store")
def check_store(
    url: str = typer.Argument(..., help="Store URL or path to probe."), json_out: bool = JSON_OPT
) -> None:
    """Probe a store by experiment (in a scratch prefix) and recommend a committer."""
    from .verify.probe import probe_store

    with _errors():
        report = probe_store(url)
    if json_out:
        _print_json(report.to_json())
        return
    t = Table(title=f"check-store {report.url}")
    for col in ("capability", "measured", "declared", "detail"):
        t.add_column(col)
    declared = report.declared.as_dict()
    alias = {
        "atomic_o1_file_rename": "atomic_file_rename",
        "atomic_o1_dir_rename": "atomic_dir_rename",
    }
    for f in report.findings:
        d = declared.get(alias.get(f.name, f.name))
        t.add_row(
            f.name,
            "yes" if f.value else "no",
            "" if d is None else ("yes" if d else "no"),
            f.detail,
        )
    console.print(t)
    console.print(f"recommended committer: [bold]{report.recommended}[/] ({report.reason})")


# --- cleanup and catalog -------------------------------------------------------------------------


@app.command()
def cleanup(
    dest: str = typer.Argument(..., help="The destination (table) to clean."),
    older_than: str = typer.Option("1h", help="Only touch what has not changed for this long."),
    rollback: bool = typer.Option(
        False, help="Undo decided Hive loads (from their journal) instead of finishing them."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be done."),
    json_out: bool = JSON_OPT,
) -> None:
    """Finish or undo what dead jobs left: a job commit that saved its intent record is
    finished (as if it had never died), any other job is rolled back so nothing of it stays
    visible. Exits 1, leaving everything in place, when a commit cannot be finished."""
    from .commit.cleanup import cleanup_destination, parse_duration
    from .store import open_store

    with _errors():
        report = cleanup_destination(
            open_store(dest),
            older_than_s=parse_duration(older_than),
            rollback=rollback,
            dry_run=dry_run,
        )
    data = report.__dict__
    if json_out:
        _print_json(data)
    elif not report.found and not report.uploads_aborted:
        console.print(f"{dest}: nothing left behind by dead jobs")
    else:
        t = Table(title=f"cleanup of {dest}" + (" (dry run)" if dry_run else ""))
        t.add_column("entry")
        t.add_column("action")
        for path in report.found:
            t.add_row(path, _cleanup_action(report, path, older_than))
        for key in report.uploads_aborted:
            t.add_row(
                key,
                "pending upload no job names: " + ("would be aborted" if dry_run else "aborted"),
            )
        console.print(t)
    if report.failed:
        raise typer.Exit(1)


def _cleanup_action(report, path: str, older_than: str) -> str:
    if path in report.failed:
        return f"LEFT IN PLACE: {report.failed[path]}"
    if path in report.skipped_recent:
        return f"skipped: changed within {older_than}"
    if path in report.rolled_forward:
        return "commit finished, job directory removed"
    if path in report.rolled_back:
        return "job rolled back, nothing of it visible"
    if path in report.removed:
        return "removed"
    return "would be recovered"


@markers_app.command("serve")
def markers_serve(
    dest: str = typer.Option(
        ..., "--dest", help="The table (store URL or path) the markers belong to."
    ),
    port: int = typer.Option(0, help="Port (0: a free one)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback unless told otherwise)."),
    token: str = typer.Option("", envvar="DATAFERRY_MARKER_TOKEN", help="Shared secret."),
    batch_interval_ms: int = typer.Option(50, help="hoodie...batch.interval_ms"),
    threads: int = typer.Option(20, help="hoodie...batch.num_threads (MARKERS<i> files)"),
    port_file: str = typer.Option("", help="Write the URL here once listening."),
) -> None:
    """Run the batching marker service until interrupted."""
    from .markers import MarkerService, MarkerServiceConfig
    from .net import announce, wait_for_signal
    from .store import open_store

    with _errors():
        config = MarkerServiceConfig(
            batch_interval_ms=batch_interval_ms, num_threads=threads, token=token
        )
        service = MarkerService(open_store(dest), config).start(host, port)
    if port_file:
        announce(port_file, service.url)
    err.print(f"marker service for {dest} listening on {service.url}")
    wait_for_signal()
    service.stop()


@shuffle_app.command("serve")
def shuffle_serve(
    dir: str = typer.Option(..., "--dir", help="The node's shuffle directory (path or store URL)."),
    port: int = typer.Option(0, help="Port (0: a free one)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback unless told otherwise)."),
    token: str = typer.Option("", envvar="DATAFERRY_SHUFFLE_TOKEN", help="Shared secret."),
    min_chunk_size: int = typer.Option(
        2 * 1024 * 1024, help="spark.shuffle.push.server.minChunkSizeInMergedShuffleFile"
    ),
    max_deferred_bytes: int = typer.Option(
        64 * 1024 * 1024, help="Memory for blocks waiting on a busy partition (then: BUSY)."
    ),
    port_file: str = typer.Option("", help="Write host:port here once listening."),
) -> None:
    """Run a node's shuffle service (serves map outputs, merges pushed blocks) until stopped."""
    from .net import announce, wait_for_signal
    from .shuffle import MergerConfig, ShuffleService
    from .store import open_store

    with _errors():
        config = MergerConfig(
            min_chunk_size=min_chunk_size, max_deferred_bytes=max_deferred_bytes, token=token
        )
        service = ShuffleService(open_store(dir), config).start(host, port)
    if port_file:
        announce(port_file, service.address)
    err.print(f"shuffle service for {dir} listening on {service.address}")
    wait_for_signal()
    service.stop()


@uploads_app.command("list")
def uploads_list(
    url: str = typer.Argument(..., help="A store URL (s3://bucket/prefix)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Multipart uploads pending under a prefix."""
    from .store import open_store

    with _errors():
        uploads = open_store(url).list_uploads("")
    if json_out:
        _print_json([u.__dict__ for u in uploads])
        return
    t = Table(title=f"{len(uploads)} pending uploads under {url}")
    for col in ("key", "upload id", "initiated (UTC)"):
        t.add_column(col)
    import datetime as _dt

    for u in uploads:
        when = _dt.datetime.fromtimestamp(u.initiated, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        t.add_row(u.path, u.upload_id[:24] + "...", when)
    console.print(t)


@uploads_app.command("abort")
def uploads_abort(
    url: str = typer.Argument(..., help="A store URL (s3://bucket/prefix)."),
    older_than: str = typer.Option("0", help="Only uploads started at least this long ago."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be aborted."),
    json_out: bool = JSON_OPT,
) -> None:
    """Abort pending multipart uploads under a prefix."""
    from .commit.cleanup import abort_uploads, parse_duration
    from .store import open_store

    with _errors():
        report = abort_uploads(
            open_store(url), older_than_s=parse_duration(older_than), dry_run=dry_run
        )
    if json_out:
        _print_json(
            {
                "pending": len(report.pending),
                "aborted": [u.__dict__ for u in report.aborted],
                "dry_run": dry_run,
            }
        )
        return
    verb = "would abort" if dry_run else "aborted"
    console.print(f"{len(report.pending)} pending under {url}; {verb} {len(report.aborted)}")


@catalog_app.command("list")
def catalog_list(
    catalog: str = typer.Argument(..., help="Catalog file (SQLite)."), json_out: bool = JSON_OPT
) -> None:
    """Tables in a catalog, with partition, file and byte counts."""
    from .store.catalog import open_catalog

    with _errors():
        tables = open_catalog(catalog).tables()
    if json_out:
        _print_json([t.__dict__ for t in tables])
        return
    t = Table(title=f"catalog {catalog}")
    for col in ("table", "location", "partitions", "files", "bytes"):
        t.add_column(col, justify="right" if col in ("partitions", "files", "bytes") else "left")
    for r in tables:
        t.add_row(r.name, r.location, str(r.partitions), str(r.files), f"{r.bytes:,}")
    console.print(t)


@catalog_app.command("partitions")
def catalog_partitions(
    catalog: str = typer.Argument(..., help="Catalog file (SQLite)."),
    table: str = typer.Argument(..., help="Table name."),
    json_out: bool = JSON_OPT,
) -> None:
    """A table's partitions: files, bytes and the job that last wrote each."""
    from .store.catalog import open_catalog

    with _errors():
        parts = open_catalog(catalog).partitions(table)
    if json_out:
        _print_json([p.__dict__ for p in parts])
        return
    t = Table(title=f"{table}: {len(parts)} partitions")
    for col in ("partition", "files", "bytes", "job"):
        t.add_column(col, justify="right" if col in ("files", "bytes") else "left")
    for p in parts:
        t.add_row(p.spec or "(table root)", str(p.files), f"{p.bytes:,}", p.job_id)
    console.print(t)


# --- verify --------------------------------------------------------------------------------------


@verify_app.command("crash")
def verify_crash_cmd(
    committer: str = typer.Option(..., "--committer", help="Committer to verify."),
    store: str = typer.Option(
        None, "--store", help="Store URL or sim:PROFILE (default: a local temp dir)."
    ),
    processes: int = typer.Option(1, help="Scenarios run in this many processes."),
    driver_kills: int = typer.Option(
        0,
        "--driver-kills",
        help="Kill the driver (SIGKILL, in a child process) at N points of the job commit, "
        "on a fresh destination and over data in each write mode; then cleanup and rerun.",
    ),
    zombies: bool = typer.Option(
        False,
        "--zombies",
        help="Zombie task attempts that commit before, during and after the job commit.",
    ),
    concurrent_jobs: bool = typer.Option(
        False, "--concurrent-jobs", help="Two jobs committing into one destination at once."
    ),
    existing_data: bool = typer.Option(
        False,
        "--existing-data",
        help="Also every crash point over a committed data set, in each write mode (3x).",
    ),
    zombie_points: int = typer.Option(
        0,
        "--zombie-points",
        help="Zombie commits at this many job-commit operations, spread (0: at every one).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the kill points and schedules."),
    kill_timeout: float = typer.Option(
        60.0, "--kill-timeout", help="Seconds a child driver may run before it is killed."
    ),
    preload: list[str] = typer.Option(
        [],
        "--preload",
        help="MODULE or MODULE:FUNCTION imported (and called) first, here and in child "
        "drivers: registers a committer that is not built in. Repeatable.",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Crash the reference job at every store operation, answer every rename, copy, upload
    completion, PUT and delete ambiguously (a timeout before or after it took effect), and
    check the invariants; with the options, also kill its driver, let zombie attempts commit,
    and race two jobs."""
    from .verify.crash import verify_crash

    with _errors(), _progress("scenarios", None, json_out) as advance:
        seen = {"done": 0}

        def on_progress(done: int, total: int) -> None:
            advance(done - seen["done"], total)
            seen["done"] = done

        report = verify_crash(
            committer,
            store,
            processes=processes,
            progress=on_progress,
            driver_kills=driver_kills,
            zombies=zombies,
            concurrent_jobs=concurrent_jobs,
            existing_data=existing_data,
            seed=seed,
            kill_timeout_s=kill_timeout,
            zombie_points=zombie_points or None,
            preload=tuple(preload),
        )
    data = report.to_json()
    if json_out:
        _print_json(data)
    else:
        kinds = data["kinds"]
        t = Table(title=f"crash points: {committer} on {data['store']}")
        t.add_column("invariant")
        for kind in kinds:
            t.add_column(kind.replace("_", " "), justify="right")
        t.add_column("total", justify="right")
        for name, n in data["violations"].items():
            cells = [kinds[k]["violations"][name] for k in kinds]
            t.add_row(
                name,
                *(f"[red]{c}[/]" if c else "[green]0[/]" for c in cells),
                f"[red]{n}[/]" if n else "[green]0[/]",
            )
        t.add_row("[dim]scenarios[/]", *(f"[dim]{kinds[k]['scenarios']}[/]" for k in kinds), "")
        console.print(t)
        console.print(
            f"{data['crash_points']} store operations, {data['scenarios']} scenarios "
            f"(crash before and after each, plus the crash-free run); outcomes: {data['outcomes']}"
        )
        extra = {
            "ambiguous answers": data["ambiguous_points"],
            "driver kills": data["driver_kills"],
            "zombie schedules": data["zombie_schedules"],
            "concurrent runs": data["concurrent_runs"],
            "crash points over existing data": data["existing_data_crash_points"],
        }
        if any(extra.values()):
            console.print(", ".join(f"{k}: {v}" for k, v in extra.items() if v))
        for kind, why in data["skipped"].items():
            console.print(f"[yellow]skipped {kind}:[/] {why}")
        for ex in data["examples"][:8]:
            where = (
                f"op #{ex['index']} {ex['when']} {ex['op']} {ex['path']}"
                if ex["index"] is not None
                else ex["when"]
            )
            kind = ex["kind"] + (f" {ex['destination']} {ex['mode']}" if ex["mode"] else "")
            sched = f" [{ex['schedule']}]" if ex["schedule"] else ""
            console.print(f"  {kind}{sched} {where}: {ex['problems'][0]}")
    if data["total_violations"]:
        raise typer.Exit(1)


# --- bench ---------------------------------------------------------------------------------------


@bench_app.command("commit")
def bench_commit(
    committers: str = typer.Option("v1,v2,manifest", help="Comma-separated committer names."),
    files: int = typer.Option(4000, help="Files in the job."),
    tasks: int = typer.Option(40, help="Tasks (each writes files/tasks files)."),
    partitions: int = typer.Option(40, help="Partition directories every task writes into."),
    store: str = typer.Option("sim:abfs", help="sim:PROFILE, 'local', or a directory."),
    io_threads: int = typer.Option(32, "--io-threads", help="Job-commit I/O threads."),
    file_size: int = typer.Option(1024, help="Bytes per file."),
    repeats: int = typer.Option(1, help="Runs per committer (interleaved); medians are shown."),
    s3_local: bool = typer.Option(
        False, "--s3-local", help="Start a local S3 server (moto) and benchmark on it."
    ),
    kill_at: float = typer.Option(
        None,
        "--kill-at",
        help="Also kill each job commit after this fraction of its files moved (0-1) and time "
        "its recovery by `dataferry cleanup`.",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Commit the same job with each committer and compare task and job commit."""
    from contextlib import ExitStack

    from .bench.commit import CommitBenchSpec, run_commit_bench
    from .store.s3_local import LocalS3Server

    with _errors(), ExitStack() as stack:
        if s3_local:
            server = stack.enter_context(LocalS3Server())
            stack.enter_context(server.exported())
            store = f"s3://{server.create_bucket()}/bench"
        spec = CommitBenchSpec(
            committers=_names(committers),
            files=files,
            tasks=tasks,
            partitions=partitions,
            store=store,
            io_threads=io_threads,
            file_size=file_size,
            repeats=repeats,
            kill_at=kill_at,
        )
        with _progress("committers", len(spec.committers) * repeats, json_out) as advance:
            report = run_commit_bench(spec, progress=lambda msg: advance(0))
    data = report.to_json()
    if json_out:
        _print_json(data)
        return
    floor = data["floor_s"]
    t = Table(
        title=f"bench commit: {files} files, {tasks} tasks, {partitions} partitions on {store} "
        f"({io_threads} I/O threads, median of {repeats})"
    )
    for col in (
        "committer",
        "task commit s (sum)",
        "job commit s",
        "vs v1",
        "limit s",
        "x limit",
        "requests / ops",
        "bytes copied",
        "task commit bytes up",
        "local disk",
    ):
        t.add_column(col, justify="left" if col == "committer" else "right")
    for r in data["results"]:
        speed = data["speedup_vs_v1"].get(r["committer"])
        requests = r["requests"].get("store_requests") or sum(
            v for k, v in r["ops"].items() if not k.endswith(".failures")
        )
        t.add_row(
            r["committer"],
            f"{r['task_commit_s']:.3f}",
            f"{r['job_commit_s']:.3f}",
            f"{speed:.1f}x" if speed else "",
            f"{r['limit_s']:.3f}" if r["limit_s"] else "-",  # no model of a real server
            f"{r['ratio_to_limit']:.2f}" if r["ratio_to_limit"] else "-",
            str(requests),
            f"{r['job_bytes_copied']:,}",
            f"{r['task_bytes_uploaded']:,}",
            f"{r['local_disk_bytes']:,}",
        )
    console.print(t)
    if floor is not None:
        console.print(
            f"limit on local disk = {files} bare renames measured in this run: {floor:.3f} s"
        )
    s = Table(title="job commit stages (s)")
    stage_names = sorted({k for r in data["results"] for k in r["stages"]})
    s.add_column("committer")
    for name in stage_names:
        s.add_column(name, justify="right")
    for r in data["results"]:
        s.add_row(
            r["committer"],
            *(f"{r['stages'].get(n, 0):.3f}" if n in r["stages"] else "" for n in stage_names),
        )
    console.print(s)
    o = Table(title="job commit store operations")
    op_names = sorted({k for r in data["results"] for k in r["ops"]})
    o.add_column("committer")
    for name in op_names:
        o.add_column(name.removeprefix("op_"), justify="right")
    for r in data["results"]:
        o.add_row(r["committer"], *(str(r["ops"].get(n, 0)) for n in op_names))
    console.print(o)
    if kill_at is not None:
        k = Table(title=f"job commit killed after {kill_at:.0%} of its files, then `cleanup`")
        cols = ("committer", "until kill s", "recovery s", "rest of full commit s", "listing s")
        for col in (*cols, "recovery / (rest + listing)"):
            k.add_column(col, justify="left" if col == "committer" else "right")
        k.add_column("outcome")
        for r in data["results"]:
            rec = r["recovery"]
            ratio = r["recovery_to_rest"]
            k.add_row(
                r["committer"],
                f"{rec['until_kill_s']:.3f}",
                f"{rec['recover_s']:.3f}",
                f"{r['rest_s']:.3f}" if r["rest_s"] is not None else "-",
                f"{rec['listing_s']:.3f}",
                f"{ratio:.2f}" if ratio is not None else "-",
                rec["outcome"] if rec["killed"] else "not killed (fewer moves)",
            )
        console.print(k)


@bench_app.command("hive")
def bench_hive(
    files: int = typer.Option(20_000, help="Staged files to load."),
    partitions: int = typer.Option(200, help="Partitions they fall into."),
    store: str = typer.Option("sim:hdfs-loaded", help="sim:PROFILE or a directory."),
    modes: str = typer.Option(
        ",".join(("one-by-one", "new-partitions", "append")), help="Modes to run."
    ),
    move_threads: int = typer.Option(15, help="hive.mv.files.thread"),
    json_out: bool = JSON_OPT,
) -> None:
    """Load the same staged tree one file at a time (as Hive did) and with dataferry's load."""
    from .bench.hive import HiveBenchSpec, run_hive_bench

    with _errors():
        spec = HiveBenchSpec(
            files=files,
            partitions=partitions,
            store=store,
            move_threads=move_threads,
            modes=_names(modes),
        )
        with _progress("modes", len(spec.modes), json_out) as advance:
            data = run_hive_bench(spec, progress=lambda _m: advance(0))
    if json_out:
        _print_json(data)
        return
    t = Table(title=f"bench hive: {files} files into {partitions} partitions on {store}")
    for col in ("mode", "load s", "speed-up", "limit s", "x limit", "requests", "files in table"):
        t.add_column(col, justify="left" if col == "mode" else "right")
    for r in data["results"]:
        sp = data["speedup_vs_one_by_one"].get(r["mode"])
        t.add_row(
            r["mode"],
            f"{r['load_s']:.2f}",
            f"{sp:.1f}x" if sp else "",
            f"{r['limit_s']:.2f}",
            f"{r['ratio_to_limit']:.2f}" if r["ratio_to_limit"] else "",
            str(r["requests"].get("store_requests", sum(r["ops"].values()))),
            str(r["files_in_table"]),
        )
    console.print(t)


@bench_app.command("markers")
def bench_markers(
    tasks: int = typer.Option(240, help="Tasks, all running at once."),
    files: int = typer.Option(24_000, help="Data files in the job."),
    store: str = typer.Option("sim:s3", help="A store model, sim:PROFILE."),
    file_size: int = typer.Option(64 * 1024, help="Bytes per data file."),
    json_out: bool = JSON_OPT,
) -> None:
    """The same write job with direct markers and with the marker service."""
    from .bench.markers import MarkersBenchSpec, run_markers_bench

    with _errors():
        spec = MarkersBenchSpec(tasks=tasks, files=files, store=store, file_size=file_size)
        with _progress("modes", 2, json_out) as advance:
            data = run_markers_bench(spec, progress=lambda _m: advance(0))
    if json_out:
        _print_json(data)
        return
    t = Table(title=f"bench markers: {files} files from {tasks} tasks on {store}")
    for col in ("markers", "marker requests", "marker files", "marker s (all tasks)", "write s"):
        t.add_column(col, justify="left" if col == "markers" else "right")
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
    size: str = typer.Option("1GiB", help="Data to shuffle (e.g. 256MiB, 1GiB)."),
    maps: int = typer.Option(100, help="Map tasks (input partitions)."),
    reduces: int = typer.Option(200, help="Reduce partitions."),
    workers: int = typer.Option(2, help="Dask workers, and embedded-engine nodes and workers."),
    repeats: int = typer.Option(1, help="Runs of each method, alternating; medians compared."),
    engine: list[str] = typer.Option(["dask", "local"], help="dask and/or local."),
    json_out: bool = JSON_OPT,
) -> None:
    """Pull, push (merged), Dask p2p and Dask tasks shuffling the same data, side by side."""
    from .bench.shuffle import ShuffleBenchSpec, parse_size, run_shuffle_bench

    with _errors():
        spec = ShuffleBenchSpec(
            size=parse_size(size),
            maps=maps,
            reduces=reduces,
            workers=workers,
            repeats=repeats,
            engines=tuple(engine),
        )
        steps = repeats * (4 * ("dask" in engine) + 2 * ("local" in engine))
        with _progress("shuffles", steps, json_out) as advance:
            data = run_shuffle_bench(spec, progress=lambda _m: advance())
    if json_out:
        _print_json(data)
        return
    t = Table(
        title=f"bench shuffle: {size} in {maps} maps x {reduces} reduces "
        f"(~{data['spec']['avg_block_bytes'] // 1024} KiB blocks)"
    )
    for col in ("engine", "method", "wall s", "MB/s", "reduce reads", "avg read KiB"):
        t.add_column(col, justify="left" if col in ("engine", "method") else "right")
    for r in data["results"]:
        t.add_row(
            r["engine"],
            r["method"],
            f"{r['wall_s']:.2f}",
            f"{r['mb_s']:.0f}",
            str(r["reduce_reads"] or "-"),
            f"{r['avg_read_bytes'] / 1024:.0f}" if r["avg_read_bytes"] else "-",
        )
    console.print(t)
    console.print(
        f"disk (sequential write, fsync): {data['disk_mb_s']:.0f} MB/s; "
        + ", ".join(f"{k} {v}" for k, v in data["summary"].items())
    )


@plan_app.command("commit")
def plan_commit_cmd(
    files: int = typer.Option(1_000_000, help="Files the job writes."),
    tasks: int = typer.Option(10_000, help="Tasks that write them."),
    partitions: int = typer.Option(1_000, help="Partition directories."),
    store: str = typer.Option("hdfs", help="Store model: hdfs, hdfs-loaded, abfs, gcs, s3."),
    committers: str = typer.Option("v1,manifest", help="Comma-separated committer names."),
    io_threads: int = typer.Option(32, help="The committers' I/O threads."),
    task_parallelism: int = typer.Option(8, help="Task commits running at once."),
    json_out: bool = JSON_OPT,
) -> None:
    """Predict each committer's task and job commit time and store requests on a store model."""
    from .bench.plan import PlanSpec, plan_commit

    names = _names(committers)
    with _errors():
        spec = PlanSpec(
            files=files,
            tasks=tasks,
            partitions=partitions,
            store=store,
            committers=names,
            io_threads=io_threads,
            task_parallelism=task_parallelism,
        )
        with _progress("calibrating", len(names) * 9, json_out) as advance:
            data = plan_commit(spec, progress=lambda _m: advance())
    if json_out:
        _print_json(data)
        return
    t = Table(
        title=f"plan commit: {files:,} files, {tasks:,} tasks, {partitions:,} partitions "
        f"on sim:{spec.profile_name} (a model, not a measurement)"
    )
    for col in (
        "committer",
        "task commit s",
        f"all task commits s ({task_parallelism} at once)",
        "job commit s",
        "job requests",
        "job bound by",
    ):
        t.add_column(col, justify="left" if col in ("committer", "job bound by") else "right")
    for p in data["predictions"]:
        t.add_row(
            p["committer"],
            f"{p['task_commit_s']:.3f}",
            f"{p['task_commits_wall_s']:,.1f}",
            f"{p['job_commit_s']:,.1f}",
            f"{p['job_requests']:,}",
            p["bound"],
        )
    console.print(t)
    console.print(f"[dim]{data['profile']}[/]")


@bench_app.command("report")
def bench_report(
    out: str = typer.Option(
        "docs/benchmarks", help="Directory for plots and JSON; the page is <out>.md."
    ),
    quick: bool = typer.Option(False, help="Tiny sizes (seconds): for trying it out."),
) -> None:
    """Run the benchmark suite and write docs/benchmarks.md with tables and plots."""
    from .bench.report import ReportSpec, run_report

    with _errors(), _progress("report", None, False) as advance:
        data = run_report(ReportSpec(out=out, quick=quick), progress=lambda _m: advance())
    console.print(f"wrote {out}.md and its plots in {data['seconds']} s")


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
    json_out: bool = JSON_OPT,
) -> None:
    """dataferry beside the writers users pick (pyarrow, polars, DuckDB, Delta Lake; Dask and
    Ray with --dask/--ray), on an in-memory table or, with --stream, a stream of batches."""
    from .bench.shuffle import parse_size
    from .bench.write import StreamBenchSpec, WriteBenchSpec, run_stream_bench, run_write_bench
    from .errors import ConfigError

    quiet = json_out or (not sys.stderr.isatty() and not console.is_terminal)
    with _errors():
        if stream is not None:
            if dask or ray:
                raise ConfigError("--dask and --ray run on the in-memory table, not --stream")
            spec: Any = StreamBenchSpec(
                size=parse_size(stream),
                partitions=partitions,
                batch_rows=batch_rows,
                repeats=repeats or 1,
                max_memory=parse_size(max_memory) if max_memory else None,
                writers=_names(writers),
            )
            run: Any = run_stream_bench
        else:
            spec = WriteBenchSpec(
                rows=rows,
                tasks=tasks,
                repeats=repeats or 5,
                writers=_names(writers),
                dask=dask,
                ray=ray,
            )
            run = run_write_bench
        with _progress("bench write", None, quiet) as advance:
            data = run(
                spec, progress=lambda label, k, n: advance(0, n, label=label, completed=k - 1)
            )
    if json_out:
        _print_json(data)
    else:
        mib = 1 << 20
        streaming = data["mode"] == "stream"
        sp = data["spec"]
        if streaming:
            title = (
                f"bench write --stream: {sp['bytes'] / mib:,.0f} MiB in {sp['batches']:,} batches "
                f"of {sp['batch_rows']:,} rows into {sp['partitions']} partitions, each writer "
                f"in its own process (median of {sp['repeats']})"
            )
            cols = ["writer", "wall s", "runs s", "x dataferry", "peak RSS MiB", "start RSS MiB"]
            cols += ["files", "file KiB min / median / max"]
        else:
            title = (
                f"bench write: {sp['rows']:,} rows ({sp['bytes'] / mib:,.0f} MiB in memory), "
                f"partitioned by {', '.join(sp['partition_by'])} (median of {sp['repeats']})"
            )
            cols = ["writer", "engine", "wall s", "runs s", "x dataferry", "files", "MiB"]
        t = Table(title=title)
        for col in (*cols, "note"):
            t.add_column(col, justify="left" if col in ("writer", "engine", "note") else "right")
        for r in data["results"]:
            ratio = f"{r['vs_dataferry']:.2f}" if r["vs_dataferry"] else "-"
            runs = ", ".join(f"{x:.2f}" for x in r["runs_s"])
            note = r["detail"] or ""
            if streaming:
                fb = r["file_bytes"]
                sizes = " / ".join(f"{fb[k] / 1024:,.0f}" for k in ("min", "median", "max"))
                cells = [
                    f"{r['wall_s']:.2f}",
                    runs,
                    ratio,
                    f"{r['rss_peak_bytes'] / mib:,.0f}",
                    f"{r['rss_start_bytes'] / mib:,.0f}",
                    f"{r['files']:,}",
                    sizes,
                ]
            else:
                cells = [
                    r["group"],
                    f"{r['wall_s']:.3f}",
                    runs,
                    ratio,
                    f"{r['files']:,}",
                    f"{r['bytes'] / mib:,.1f}",
                ]
            t.add_row(r["writer"], *cells, str(note))
        console.print(t)
        if data.get("ratio"):
            console.print(f"dataferry / pyarrow direct write: {data['ratio']:.2f}x")
        console.print(
            "[dim]x dataferry: a writer's median over that of the dataferry writer on the same "
            "engine (dataferry, dataferry.dask, dataferry.ray)[/]"
        )
        for n in data["notes"]:
            console.print(f"[dim]{n}[/]")
        if streaming:
            console.print(f"[dim]{data['rss_method']}[/]")
        for s in data["skipped"]:
            console.print(f"[yellow]skipped[/] {s['writer']}: {s['reason']}")
        for f in data["failed"]:
            console.print(f"[bold red]failed[/] {f['writer']} ({f['group']}): {f['reason']}")
    if data["failed"]:
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
