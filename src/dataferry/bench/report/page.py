"""The report's page: `page.md` (a template beside this module) filled with the run's tables
and figures, written with its plots and the raw JSON through the store layer."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from importlib import resources
from string import Template
from typing import Any

from ...store import LocalStore
from ..shuffle_profile import PROFILE_COLUMNS, SCALE_COLUMNS, profile_rows, scale_rows
from .plots import draw_plots
from .spec import S3_SERVER, ReportSpec


def write_page(spec: ReportSpec, data: dict[str, Any]) -> list[str]:
    """docs/benchmarks.md, its PNGs and report.json, through the store layer."""
    out = os.path.abspath(spec.out)
    parent, name = os.path.dirname(out), os.path.basename(out)
    files = LocalStore(parent)
    scratch = tempfile.mkdtemp(prefix="dataferry-report-")
    try:
        figures = draw_plots(data, scratch)
        files.delete(name, recursive=True)
        drawn = LocalStore(scratch)
        for fig in figures:
            files.write_bytes(f"{name}/{fig}", drawn.read_bytes(fig))
        files.write_bytes(f"{name}/report.json", json.dumps(data, indent=2).encode())
        files.write_bytes(f"{name}.md", render_page(name, data).encode())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [f"{name}.md", *(f"{name}/{f}" for f in figures)]


def _change(reduction: float | None) -> str:
    if reduction is None:
        return "not measured"
    word = "less" if reduction >= 0 else "more"
    return f"{abs(reduction) * 100:.1f}% {word} with the service"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_page(name: str, data: dict[str, Any]) -> str:
    m = data["machine"]
    commit_rows = [
        [r["store"], r["committer"], r["files"], r["tasks"], r["job_commit_s"], r["requests"]]
        for r in data["commit"]
    ]
    checks = data["plan"]["checks"]
    plan_rows = [
        [
            c["committer"],
            f"sim:{c['store']}",
            f"{c['files']:,}",
            c["measured_s"],
            c["predicted_s"],
            f"{c['error'] * 100:+.0f}%",
            c["measured_requests"],
            c["predicted_requests"],
        ]
        for c in checks
    ]
    table_rows = [
        [
            r["committer"],
            f"sim:{r['store']}",
            f"{r['files']:,}",
            f"{r['tasks']:,}",
            f"{r['task_commits_wall_s']:,.1f}",
            f"{r['job_commit_s']:,.1f}",
            f"{r['job_requests']:,}",
            r["bound"],
        ]
        for r in data["plan"]["table"]
    ]
    mk = data["markers"]
    marker_rows = [
        [r["markers"], r["marker_ops"], r["marker_files"], r["marker_s"], r["write_s"]]
        for r in mk["results"]
    ]
    sh = data["shuffle"]
    shuffle_rows = [
        [
            r["engine"],
            r["method"],
            r["wall_s"],
            ", ".join(map(str, r["runs_s"])),
            r["mb_s"],
            r["reduce_reads"] or "-",
            round(r["avg_read_bytes"] / 1024) if r["avg_read_bytes"] else "-",
            r.get("ref_blocks") or "-",
            round(sum(p["cpu_s"] for p in r.get("processes", {}).values()), 1),
        ]
        for r in sh["results"]
    ]
    scale = sh.get("scale", {"sizes": [], "scale": []})
    wr = data["write"]
    write_rows = [
        [
            r["writer"],
            r["group"] if r.get("codec", "default") == "default" else f"{r['group']} {r['codec']}",
            r["wall_s"],
            ", ".join(map(str, r["runs_s"])),
            "-" if r["vs_dataferry"] is None else r["vs_dataferry"],
            f"{r['files']:,}",
            f"{r['bytes'] / 2**20:,.1f}",
        ]
        for r in wr["results"]
    ]
    write_ratio = "not measured" if wr["ratio"] is None else f"**{wr['ratio']}x**"
    write_absent = "".join(
        f"\n- {r['writer']} skipped: {r['reason']}" for r in wr.get("skipped", [])
    ) + "".join(f"\n- {r['writer']} failed: {r['reason']}" for r in wr.get("failed", []))
    worst = max((abs(c["error"]) for c in checks), default=0.0)
    spec = sh["spec"]
    return _template().substitute(
        date=m["date"],
        cpus=m["cpus"],
        platform=m["platform"],
        python=m["python"],
        seconds=data["seconds"],
        name=name,
        quick_note=" (Quick mode: sizes shrunk for a test.)" if data["quick"] else "",
        s3_server=S3_SERVER,
        commit_table=_table(
            ["store", "committer", "files", "tasks", "job commit s", "store requests"],
            commit_rows,
        ),
        check_files=f"{checks[0]['files'] if checks else 0:,}",
        worst_error=f"{worst * 100:.0f}",
        check_table=_table(
            [
                "committer",
                "store",
                "files",
                "measured s",
                "predicted s",
                "error",
                "measured requests",
                "predicted requests",
            ],
            plan_rows,
        ),
        predicted_table=_table(
            [
                "committer",
                "store",
                "files",
                "tasks",
                "task commits s (8 at once)",
                "job commit s",
                "job requests",
                "job bound by",
            ],
            table_rows,
        ),
        marker_files=mk["spec"]["files"],
        marker_tasks=mk["spec"]["tasks"],
        marker_store=mk["spec"]["store"],
        marker_ops_ratio=mk["marker_ops_ratio"],
        marker_write_change=_change(mk["write_time_reduction"]),
        marker_table=_table(
            ["markers", "marker requests", "marker files", "marker s (all tasks)", "write s"],
            marker_rows,
        ),
        shuffle_mib=spec["size"] >> 20,
        shuffle_maps=spec["maps"],
        shuffle_reduces=spec["reduces"],
        shuffle_block_kib=spec["avg_block_bytes"] // 1024,
        shuffle_workers=spec["workers"],
        disk_mb_s=sh["disk_mb_s"],
        disk_limit_s=sh["disk_limit_s"],
        shuffle_summary=", ".join(f"{k} {v}" for k, v in sh["summary"].items()),
        shuffle_table=_table(
            [
                "engine",
                "method",
                "median s",
                "runs s",
                "MB/s",
                "reduce reads",
                "avg read KiB",
                "blocks by ref",
                "CPU s",
            ],
            shuffle_rows,
        ),
        shuffle_profile_table=_table(list(PROFILE_COLUMNS), profile_rows(sh["results"])),
        scale_sizes=", ".join(f"{size / 2**30:g}" for size in scale["sizes"]),
        shuffle_scale_table=_table(list(SCALE_COLUMNS), scale_rows(scale["scale"])),
        write_rows=f"{wr['spec']['rows']:,}",
        write_partition_by=", ".join(wr["spec"]["partition_by"]),
        write_repeats=wr["spec"]["repeats"],
        write_ratio=write_ratio,
        write_table=_table(
            ["writer", "engine", "median s", "runs s", "x dataferry", "files", "MiB"], write_rows
        ),
        write_absent=write_absent,
        write_profile=profile_section(wr.get("profile")),
    )


def profile_section(profile: dict[str, Any] | None) -> str:
    """`bench write --profile`'s two tables (dataferry's parts; every writer at one codec)."""
    if not profile:
        return "(not measured in this report)"
    sp = profile["spec"]
    walls = {w["writer"]: w["wall_s"] for w in profile["writers"]}
    wall = walls.get("dataferry") or 0.0
    parts = [
        [
            p["label"],
            p["s"],
            f"{100 * p['s'] / wall:.0f}%" if wall and "thread-s" not in p["label"] else "-",
        ]
        for p in profile["parts"]
        if p["s"] is not None
    ]
    writers = [
        [w["writer"], w["wall_s"], ", ".join(map(str, w["runs_s"])), w["cpu_s"], w["vs_fastest"]]
        for w in profile["writers"]
    ]
    return "\n\n".join(
        [
            f"{sp['rows']:,} rows at {sp['compression']}, median of {sp['repeats']} "
            "(thread-s: summed over the tasks' threads; CPU s: the process's, all threads).",
            _table(["part of dataferry's write", "s", "of wall"], parts),
            _table(["writer", "median s", "runs s", "CPU s", "x fastest"], writers),
        ]
    )


def _template() -> Template:
    """The page's text, `page.md` in this package (package data)."""
    return Template(resources.files(__package__).joinpath("page.md").read_text(encoding="utf-8"))
