"""`dataferry verify crash`: the crash-point harness, rendered; exit 1 on any violation."""

from __future__ import annotations

import typer
from rich.text import Text

from .app import verify_app
from .locations import need_directory
from .output import JSON_OPT, QUIET_OPT, console, print_json, progress, table


def _count(n: int, style: str = "") -> Text:
    """A violation count: red when there are any, green when none."""
    return Text(str(n), style=style or ("red" if n else "green"))


@verify_app.command("crash")
def verify_crash_cmd(
    committer: str = typer.Option(..., "--committer", help="Committer to verify."),
    store: str = typer.Option(
        None,
        "--store",
        help="Store URL or sim:PROFILE (default: a local temp dir); a server's credentials come "
        "from the environment its client reads (AWS_*, AZURE_STORAGE_CONNECTION_STRING, "
        "STORAGE_EMULATOR_HOST).",
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
    races: bool = typer.Option(
        None,
        "--races/--no-races",
        help="A live claim holder (a child driver stopped mid-commit) raced by a job with its "
        "clock skewed -/+300 s, by a job with claim_timeout_s=0.2 and by cleanup --older-than "
        "0; two takers of a dead claim; damaged claim and intent records; links to a "
        "directory outside. Default: on with --concurrent-jobs.",
        show_default=False,
    ),
    race_schedule: list[str] = typer.Option(
        [],
        "--race-schedule",
        help="Only this race schedule (skewed_clock, taker_clock_ahead, short_timeout, "
        "longer_lease, lease_expired, cleanup_race, "
        "two_takers, overtaken_batches, damaged_intent, cleanup_writing, table_landed, damaged_record, links); implies --races. Repeatable.",
    ),
    existing_data: bool = typer.Option(
        False,
        "--existing-data",
        help="Also every crash point over a committed data set, in each write mode, a "
        "partition overwrite included (4x).",
    ),
    forged_markers: bool = typer.Option(
        False,
        "--forged-markers",
        help="Markers naming a committed job's files forged into a made-up job's, a same-tag "
        "and that job's own directory, then cleanup or the next job; into a live job's own "
        "directory as it commits; and forged intent and job records (committers with markers).",
    ),
    zombie_points: int = typer.Option(
        0,
        "--zombie-points",
        help="Zombie commits at this many job-commit operations, spread (0: at every one).",
    ),
    every: int = typer.Option(
        1,
        "--every",
        min=1,
        help="Every N-th crash point and ambiguous answer only (odd N keeps before and after "
        "of an operation both among them): a sample, on a slow store or a real server.",
    ),
    committer_options: str = typer.Option(
        "",
        "--committer-options",
        help="The committer's options as a JSON object, e.g. an Iceberg catalog: "
        '\'{"catalog": {"type": "rest", "uri": ...}}\' (each scenario\'s table is named '
        "after its destination directory).",
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
    quiet: bool = QUIET_OPT,
) -> None:
    """Crash the reference job at every store operation, answer every rename, copy, upload
    completion, PUT and delete ambiguously (a timeout before or after it took effect), and
    check the invariants; with the options, also kill its driver, let zombie attempts commit,
    race two jobs, race a live claim holder, damage records, put links in the destination and
    forge markers and records naming committed files."""
    from ..verify.crash import verify_crash

    if store:
        need_directory(store, "where the harness writes its jobs", "--store")
    options = _options(committer_options)
    with progress(f"verify crash {committer}: scenarios", None, json_out or quiet) as steps:
        report = verify_crash(
            committer,
            store,
            options=options,
            processes=processes,
            every=every,
            progress=lambda done, total: steps.update(done, total),
            driver_kills=driver_kills,
            zombies=zombies,
            concurrent_jobs=concurrent_jobs,
            existing_data=existing_data,
            seed=seed,
            kill_timeout_s=kill_timeout,
            zombie_points=zombie_points or None,
            races=tuple(race_schedule) or (concurrent_jobs if races is None else races),
            preload=tuple(preload),
            forged_markers=forged_markers,
            keep_going=True,
        )
    data = report.to_json()
    if json_out:
        print_json(data)
    else:
        _render(data, committer)
    if data["total_violations"]:
        raise typer.Exit(1)
    if data["errors"]:
        raise typer.Exit(3)  # no violation found, but not every family finished


def _options(text: str) -> dict | None:
    """--committer-options: a JSON object, or a clear error naming what is wrong."""
    if not text:
        return None
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise typer.BadParameter(f"not JSON: {e}", param_hint="--committer-options") from None
    if not isinstance(value, dict):
        raise typer.BadParameter("must be a JSON object", param_hint="--committer-options")
    return value


def _render(data: dict, committer: str) -> None:
    """The violations by invariant and kind of scenario, then the counts and examples."""
    kinds = data["kinds"]
    columns = ["invariant", *(kind.replace("_", " ") for kind in kinds), "total"]
    t = table(f"crash points: {committer} on {data['store']}", columns)
    for name, n in data["violations"].items():
        cells = [_count(kinds[k]["violations"][name]) for k in kinds]
        t.add_row(name, *cells, _count(n))
    t.add_row(
        Text("scenarios", style="dim"),
        *(_count(kinds[k]["scenarios"], "dim") for k in kinds),
        "",
    )
    console.print(t)
    lines = [
        f"{data['crash_points']} store operations, {data['scenarios']} scenarios "
        f"(crash before and after each, plus the crash-free run); outcomes: {data['outcomes']}"
    ]
    extra = {
        "ambiguous answers": data["ambiguous_points"],
        "driver kills": data["driver_kills"],
        "zombie schedules": data["zombie_schedules"],
        "concurrent runs": data["concurrent_runs"],
        "race schedules": data["race_schedules"],
        "crash points over existing data": data["existing_data_crash_points"],
        "forgeries": data["forgeries"],
    }
    if any(extra.values()):
        lines.append(", ".join(f"{k}: {v}" for k, v in extra.items() if v))
    lines += [f"skipped {kind}: {why}" for kind, why in data["skipped"].items()]
    lines += [f"did not finish {family}: {why}" for family, why in data["errors"].items()]
    for ex in data["examples"][:8]:
        where = (
            f"op #{ex['index']} {ex['when']} {ex['op']} {ex['path']}"
            if ex["index"] is not None
            else ex["when"]
        )
        kind = ex["kind"] + (f" {ex['destination']} {ex['mode']}" if ex["mode"] else "")
        sched = f" [{ex['schedule']}]" if ex["schedule"] else ""
        lines.append(f"  {kind}{sched} {where}: {ex['problems'][0]}")
    for line in lines:
        console.print(line, markup=False, highlight=False)
