"""Commit benchmarks: `bench commit`, `bench hive` and `plan commit`, rendered as tables."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import typer

from ..stats import request_count
from .app import bench_app, plan_app
from .locations import need_directory
from .output import JSON_OPT, QUIET_OPT, console, names, print_json, progress, table


@bench_app.command("commit")
def bench_commit(
    committers: str = typer.Option("v1,v2,manifest", help="Comma-separated committer names."),
    files: int = typer.Option(4000, help="Files in the job."),
    tasks: int = typer.Option(40, help="Tasks (each writes files/tasks files)."),
    partitions: int = typer.Option(40, help="Partition directories every task writes into."),
    store: str = typer.Option(
        "sim:abfs",
        help="sim:PROFILE, 'local', a directory, or a server's URL (gs://bucket/prefix).",
    ),
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
    hadoop: bool = typer.Option(
        False,
        "--hadoop",
        help="Also run Hadoop's own FileOutputCommitter v1 (pyspark's jars, Java 17) on the "
        "same job, its task commits one at a time (--store local).",
    ),
    hadoop_s3a: bool = typer.Option(
        False,
        "--hadoop-s3a",
        help="With --s3-local or an s3:// --store: also run Hadoop's own S3A magic committer "
        "(hadoop-aws, `make "
        "jars`, Java 17) on the same server and job, its task commits one at a time; its job "
        "commit's requests from S3A's own statistics.",
    ),
    task_parallelism: int = typer.Option(
        8, "--task-parallelism", help="Task commits at once (1: one at a time, as --hadoop's)."
    ),
    clients: bool = typer.Option(
        False,
        "--clients",
        help="With --s3-local: instead of the committers, compare the S3 client libraries "
        "(boto3, s3fs, obstore) replaying a job commit's requests (--files objects, "
        "--io-threads at once, --repeats runs each).",
    ),
    json_out: bool = JSON_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """Commit the same job with each committer and compare task and job commit."""
    from ..bench.commit import CommitBenchSpec, run_commit_bench
    from ..testing import LocalS3Server

    if hadoop_s3a and not (s3_local or store.startswith("s3://")):
        raise typer.BadParameter(
            "--hadoop-s3a needs --s3-local or an s3:// --store (its server in AWS_ENDPOINT_URL)",
            param_hint="--hadoop-s3a",
        )
    if clients and not s3_local:
        raise typer.BadParameter("--clients needs --s3-local", param_hint="--clients")
    if not s3_local and store != "local" and "://" not in store:
        need_directory(store, "sim:PROFILE, 'local', or a directory", "--store")
    with ExitStack() as stack:
        if s3_local:
            server = stack.enter_context(LocalS3Server())
            stack.enter_context(server.exported())
            store = f"s3://{server.create_bucket()}/bench"
        if clients:
            _bench_clients(store, files, io_threads, repeats, file_size, json_out, quiet)
            return
        spec = CommitBenchSpec(
            committers=names(committers),
            files=files,
            tasks=tasks,
            partitions=partitions,
            store=store,
            io_threads=io_threads,
            file_size=file_size,
            repeats=repeats,
            kill_at=kill_at,
            hadoop=hadoop,
            hadoop_s3a=hadoop_s3a,
            task_parallelism=task_parallelism,
        )
        with progress("bench commit", None, json_out or quiet) as steps:
            data = run_commit_bench(spec, progress=steps.step).to_json()
    if json_out:
        print_json(data)
        return
    title = (
        f"bench commit: {files} files, {tasks} tasks, {partitions} partitions on {store} "
        f"({io_threads} I/O threads, median of {repeats})"
    )
    _render_commit(data, title, files, kill_at)


def _render_commit(data: dict[str, Any], title: str, files: int, kill_at: float | None) -> None:
    t = table(
        title,
        (
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
            "job commit +MiB",
        ),
    )
    for r in data["results"]:
        speed = data["speedup_vs_v1"].get(r["committer"])
        t.add_row(
            r["committer"],
            f"{r['task_commit_s']:.3f}",
            f"{r['job_commit_s']:.3f}",
            f"{speed:.1f}x" if speed else "",
            f"{r['limit_s']:.3f}" if r["limit_s"] else "-",  # no model of a real server
            f"{r['ratio_to_limit']:.2f}" if r["ratio_to_limit"] else "-",
            str(request_count(r["requests"], r["ops"])),
            f"{r['job_bytes_copied']:,}",
            f"{r['task_bytes_uploaded']:,}",
            f"{r['local_disk_bytes']:,}",
            "-" if r.get("job_rss_growth_mib") is None else f"{r['job_rss_growth_mib']:.1f}",
        )
    console.print(t)
    if data["floor_s"] is not None:
        what = data.get("floor_what", "bare renames")
        console.print(
            f"limit on {data['floor_on']} = {files} {what} measured in this run: "
            f"{data['floor_s']:.3f} s"
        )
    _render_hadoop(data)
    _render_hadoop_s3a(data)
    stage_names = sorted({k for r in data["results"] for k in r["stages"]})
    s = table("job commit stages (s)", ("committer", *stage_names))
    for r in data["results"]:
        s.add_row(
            r["committer"],
            *(f"{r['stages'].get(n, 0):.3f}" if n in r["stages"] else "" for n in stage_names),
        )
    console.print(s)
    op_names = sorted({k for r in data["results"] for k in r["ops"]})
    o = table(
        "job commit store operations", ("committer", *(n.removeprefix("op_") for n in op_names))
    )
    for r in data["results"]:
        o.add_row(r["committer"], *(str(r["ops"].get(n, 0)) for n in op_names))
    console.print(o)
    if kill_at is not None:
        k = table(
            f"job commit killed after {kill_at:.0%} of its files, then `cleanup`",
            (
                "committer",
                "until kill s",
                "recovery s",
                "rest of full commit s",
                "listing s",
                "recovery / (rest + listing)",
                "outcome",
            ),
            left=("committer", "outcome"),
        )
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


def _render_hadoop_s3a(data: dict[str, Any]) -> None:
    """Hadoop's magic committer beside dataferry's upload committers (`--hadoop-s3a`)."""
    peer = data.get("hadoop_s3a")
    if peer is None:
        return
    if "skipped" in peer:
        console.print(f"hadoop magic: skipped ({peer['skipped']})", markup=False)
        return
    t = table(
        f"Hadoop {peer['hadoop']} S3A magic committer on the same server and job (median)",
        ("committer", "task commit s (sum)", "job commit s", "job commit requests"),
    )
    t.add_row(
        "hadoop magic",
        f"{peer['task_commit_s']:.3f}",
        f"{peer['job_commit_s']:.3f}",
        str(int(peer["job_commit_requests"])),
    )
    for r in data["results"]:
        if r["committer"] in ("magic", "directory", "partitioned"):
            t.add_row(
                f"dataferry {r['committer']}",
                f"{r['task_commit_s']:.3f}",
                f"{r['job_commit_s']:.3f}",
                str(request_count(r["requests"], r["ops"])),
            )
    console.print(t)


def _render_hadoop(data: dict[str, Any]) -> None:
    """Hadoop's v1 (and its manifest committer, when the bench ran dataferry's) beside
    dataferry's committers of those names, when `--hadoop` ran them (or why it did not)."""
    peer = data.get("hadoop")
    if peer is None:
        return
    if "skipped" in peer:
        console.print(f"hadoop v1: skipped ({peer['skipped']})", markup=False)
        return
    mine = {r["committer"]: r for r in data["results"]}
    t = table(
        f"Hadoop {peer['hadoop']} committers on the same job, task commits one at a time (median)",
        (
            "committer",
            "task commit s (sum)",
            "one task commit ms (median)",
            "job commit s",
            "task commit vs Hadoop's",
            "job commit vs Hadoop's",
        ),
    )
    for name, theirs in (("v1", peer), ("manifest", peer.get("manifest"))):
        if theirs is None:
            continue
        t.add_row(
            f"hadoop {name}",
            f"{theirs['task_commit_s']:.3f}",
            f"{theirs.get('task_commit_median_s', 0) * 1000:.2f}",
            f"{theirs['job_commit_s']:.3f}",
            "1.0x",
            "1.0x",
        )
        ours = mine.get(name)
        if ours is None:
            continue
        t.add_row(
            f"dataferry {name}",
            f"{ours['task_commit_s']:.3f}",
            f"{ours.get('task_commit_median_s', 0) * 1000:.2f}",
            f"{ours['job_commit_s']:.3f}",
            _ratio(ours["task_commit_s"], theirs["task_commit_s"]),
            _ratio(ours["job_commit_s"], theirs["job_commit_s"]),
        )
    console.print(t)


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}x" if theirs else "-"


def _bench_clients(
    store: str, files: int, threads: int, repeats: int, file_size: int, json_out: bool, quiet: bool
) -> None:
    """Run the S3 client comparison on the local server's bucket and show it."""
    from ..bench.s3_clients import ClientBenchSpec, S3Target, run_client_bench

    spec = ClientBenchSpec(files=files, threads=threads, repeats=repeats, file_size=file_size)
    target = S3Target.from_env(store.split("://", 1)[1].split("/", 1)[0])
    with progress("bench commit --clients", None, json_out or quiet) as steps:
        data = run_client_bench(spec, target, progress=steps.step).to_json()
    if json_out:
        print_json(data)
        return
    _render_clients(data)


def _render_clients(data: dict[str, Any]) -> None:
    spec = data["spec"]
    t = table(
        f"S3 clients at job commit: {spec['files']} objects, {spec['threads']} at once, "
        f"median of {spec['repeats']} on {data['endpoint']}",
        (
            "scenario",
            "client",
            "version",
            "requests",
            "requests/s",
            "vs boto3",
            "CPU us/req",
            "note",
        ),
        left=("scenario", "client", "version", "note"),
    )
    for r in data["results"]:
        ok, ratio = r["status"] == "ok", r["ratio_to_boto3"]
        t.add_row(
            r["scenario"],
            r["client"],
            r["version"] or "-",
            str(r["runs"][0]["requests"]) if ok else "-",
            f"{r['median_rps']:.0f}" if ok else "-",
            f"{ratio:.2f}x" if ratio is not None else "-",
            f"{r['cpu_us_per_request']:.0f}" if ok else "-",
            "" if ok else f"{r['status']}: {r['reason']}",
        )
    console.print(t)
    for name, what in data["scenarios"].items():
        console.print(f"{name}: {what}", style="dim", markup=False)
    before, after = data["machine"]["load_1min"]
    console.print(
        f"load average (1 min) before / after: {before:.1f} / {after:.1f} on "
        f"{data['machine']['cpus']} CPUs",
        style="dim",
        markup=False,
    )


@bench_app.command("hive")
def bench_hive(
    files: int = typer.Option(20_000, help="Staged files to load."),
    partitions: int = typer.Option(200, help="Partitions they fall into."),
    store: str = typer.Option(
        "sim:hdfs-loaded", help="sim:PROFILE, a directory or a server (hdfs://namenode:port/dir)."
    ),
    modes: str = typer.Option(
        ",".join(("one-by-one", "new-partitions", "append")), help="Modes to run."
    ),
    move_threads: int = typer.Option(15, help="hive.mv.files.thread"),
    json_out: bool = JSON_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """Load the same staged tree one file at a time (as Hive did) and with dataferry's load."""
    from ..bench.hive import HiveBenchSpec, run_hive_bench

    need_directory(store, "sim:PROFILE or a directory", "--store")
    spec = HiveBenchSpec(
        files=files,
        partitions=partitions,
        store=store,
        move_threads=move_threads,
        modes=names(modes),
    )
    with progress("bench hive: load mode", len(spec.modes), json_out or quiet) as steps:
        data = run_hive_bench(spec, progress=steps.step)
    if json_out:
        print_json(data)
        return
    t = table(
        f"bench hive: {files} files into {partitions} partitions on {store}",
        ("mode", "load s", "speed-up", "limit s", "x limit", "requests", "files in table"),
    )
    for r in data["results"]:
        sp = data["speedup_vs_one_by_one"].get(r["mode"])
        t.add_row(
            r["mode"],
            f"{r['load_s']:.2f}",
            f"{sp:.1f}x" if sp else "",
            f"{r['limit_s']:.2f}",
            f"{r['ratio_to_limit']:.2f}" if r["ratio_to_limit"] else "",
            str(request_count(r["requests"], r["ops"])),
            str(r["files_in_table"]),
        )
    console.print(t)


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
    quiet: bool = QUIET_OPT,
) -> None:
    """Predict each committer's task and job commit time and store requests on a store model."""
    from ..bench.plan import PlanSpec, plan_commit, plan_steps

    spec = PlanSpec(
        files=files,
        tasks=tasks,
        partitions=partitions,
        store=store,
        committers=names(committers),
        io_threads=io_threads,
        task_parallelism=task_parallelism,
    )
    with progress("plan commit: calibrating", plan_steps(spec), json_out or quiet) as steps:
        data = plan_commit(spec, progress=steps.step)
    if json_out:
        print_json(data)
        return
    t = table(
        f"plan commit: {files:,} files, {tasks:,} tasks, {partitions:,} partitions "
        f"on sim:{spec.profile_name} (a model, not a measurement)",
        (
            "committer",
            "task commit s",
            f"all task commits s ({task_parallelism} at once)",
            "job commit s",
            "job requests",
            "job bound by",
        ),
        left=("committer", "job bound by"),
    )
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
    console.print(data["profile"], style="dim", markup=False)
