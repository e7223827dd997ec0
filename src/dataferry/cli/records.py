"""Commands that show records: `success`, `manifest`, `catalog list|partitions`. They only
read; a record that is not there is an error, and nothing is created."""

from __future__ import annotations

import typer

from ..errors import NotFound
from ..stats import IOStatistics
from .app import app, catalog_app
from .locations import need_file, need_something
from .output import JSON_OPT, console, ops_table, pairs, print_json, table


@app.command()
def success(
    path: str = typer.Argument(..., help="A destination directory or a _SUCCESS file."),
    json_out: bool = JSON_OPT,
) -> None:
    """Show and validate a _SUCCESS file: an empty legacy marker or a JSON summary."""
    from ..commit.records.success import load_success

    need_something(path, "success takes a destination directory or its _SUCCESS file")
    marker = load_success(path)
    if marker.data is None:
        if json_out:
            print_json({"path": path, "legacy": True})
        else:
            console.print(
                f"{path}: empty _SUCCESS (classic FileOutputCommitter marker, no details)",
                markup=False,
            )
        return
    data = marker.data.to_json()
    if json_out:
        print_json(data)
        return
    keys = ("committer", "jobId", "jobIdSource", "success", "state", "stage", "date", "hostname")
    rows = [(k, data[k]) for k in keys if data.get(k) is not None]
    rows.append(("files listed", f"{len(data['filenames'])} (at most 100 are listed)"))
    console.print(pairs(f"_SUCCESS at {path}", rows))
    if data["metrics"]:
        console.print(pairs("metrics", data["metrics"].items()))
    if data["diagnostics"]:
        console.print(
            pairs("diagnostics", ((k, str(v)[:200]) for k, v in data["diagnostics"].items()))
        )
    stats = IOStatistics(data.get("iostatistics") or {})
    if stats.durations():
        console.print(ops_table(stats, "I/O statistics"))


@app.command()
def manifest(
    path: str = typer.Argument(..., help="A task manifest file, or a directory of them."),
    files: int = typer.Option(10, min=0, help="How many file entries to show per manifest."),
    json_out: bool = JSON_OPT,
) -> None:
    """Show and validate task manifests (ours or Hadoop's manifest committer's)."""
    from ..commit.manifest.files import load_manifest_file, manifest_files_in

    need_something(path, "manifest takes a task manifest file or a directory of them")
    found = [(p, *load_manifest_file(p)) for p in manifest_files_in(path)]
    if not found:
        raise NotFound(f"{path}: no task manifests (*-manifest.json) there", path)
    if json_out:
        print_json(
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
    for p, m, size in found:
        rows = (
            ("job", m.job_id),
            ("task / attempt", f"{m.task_id} / {m.task_attempt_id}"),
            ("attempt directory", m.task_attempt_dir),
            ("files / bytes", f"{len(m.files)} / {m.total_size:,}"),
            ("directories", str(len(m.directories))),
            ("manifest size", f"{size:,} bytes"),
        )
        console.print(pairs(f"manifest {p}", rows))
        if m.files and files > 0:
            ft = table("", ("destination", "size", "etag"), left=("destination", "etag"))
            for f in m.files[:files]:
                ft.add_row(f.dest, f"{f.size:,}", f.etag or "")
            console.print(ft)


@catalog_app.command("list")
def catalog_list(
    catalog: str = typer.Argument(..., help="Catalog file (SQLite)."), json_out: bool = JSON_OPT
) -> None:
    """Tables in a catalog, with partition, file and byte counts."""
    from ..commit.hive.catalog import open_catalog

    need_file(catalog, "catalog list takes a catalog file, SQLite")
    tables = open_catalog(catalog, create=False).tables()
    if json_out:
        print_json([t.__dict__ for t in tables])
        return
    t = table(
        f"catalog {catalog}",
        ("table", "location", "partitions", "files", "bytes"),
        left=("table", "location"),
    )
    for r in tables:
        t.add_row(r.name, r.location, str(r.partitions), str(r.files), f"{r.bytes:,}")
    console.print(t)


@catalog_app.command("partitions")
def catalog_partitions(
    catalog: str = typer.Argument(..., help="Catalog file (SQLite)."),
    table_name: str = typer.Argument(..., metavar="TABLE", help="Table name or location."),
    json_out: bool = JSON_OPT,
) -> None:
    """A table's partitions: files, bytes and the job that last wrote each."""
    from ..commit.hive.catalog import open_catalog

    need_file(catalog, "catalog partitions takes a catalog file, SQLite")
    parts = open_catalog(catalog, create=False).partitions(table_name)
    if json_out:
        print_json([p.__dict__ for p in parts])
        return
    t = table(
        f"{table_name}: {len(parts)} partitions",
        ("partition", "files", "bytes", "job"),
        left=("partition", "job"),
    )
    for p in parts:
        t.add_row(p.spec or "(table root)", str(p.files), f"{p.bytes:,}", p.job_id)
    console.print(t)
