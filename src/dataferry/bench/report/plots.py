"""The report's plots (PNG, matplotlib): one figure per section, each with the machine in
its footer."""

from __future__ import annotations

import math
import os
from typing import Any


def _footer(data: dict[str, Any]) -> str:
    m = data["machine"]
    return f"{m['cpus']} CPUs, {m['platform']}, Python {m['python']}; `dataferry bench report`; {m['date']}"


def _log_axes(ax: Any) -> None:
    """Log scales labelled with plain numbers (1,000 rather than 10^3) at 1, 2 and 5 times
    each power of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())


def draw_plots(data: dict[str, Any], directory: str) -> list[str]:
    from ...extras import require

    matplotlib = require("matplotlib", "the benchmark report's plots")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    footer = _footer(data)
    made = []

    def save(fig: Any, name: str) -> None:
        fig.text(0.01, 0.005, footer, fontsize=6, color="grey")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        fig.savefig(os.path.join(directory, name), dpi=110)
        plt.close(fig)
        made.append(name)

    # job commit time vs files, one panel per store model
    stores = sorted(
        {r["store"] for r in data["commit"]}, key=lambda s: (not s.startswith("sim:"), s)
    )
    committers = sorted({r["committer"] for r in data["commit"]})
    colour = {c: f"C{i}" for i, c in enumerate(committers)}  # one colour a committer, everywhere
    columns = min(2, len(stores))
    rows = math.ceil(len(stores) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.3 * rows), squeeze=False)
    for ax, store in zip(axes.flat, stores, strict=False):
        for committer in committers:
            pts = sorted(
                (r["files"], r["job_commit_s"])
                for r in data["commit"]
                if r["store"] == store and r["committer"] == committer
            )
            if pts:
                ax.plot(
                    [p[0] for p in pts],
                    [p[1] for p in pts],
                    marker="o",
                    label=committer,
                    color=colour[committer],
                )
        ax.set_title(store)
        ax.set_xlabel("files")
        ax.set_ylabel("job commit s")
        _log_axes(ax)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(stores) :]:
        ax.set_visible(False)
    save(fig, "commit.png")

    # the planner: predicted against measured, and the prediction up to 1M files
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    checks = data["plan"]["checks"]
    labels = [f"{c['committer']}\nsim:{c['store']}" for c in checks]
    xs = range(len(checks))
    a1.bar([x - 0.2 for x in xs], [c["measured_s"] for c in checks], 0.4, label="measured")
    a1.bar([x + 0.2 for x in xs], [c["predicted_s"] for c in checks], 0.4, label="predicted")
    a1.set_xticks(list(xs), labels, fontsize=7)
    a1.set_ylabel("job commit s")
    a1.set_title(f"prediction check at {checks[0]['files']:,} files" if checks else "")
    a1.legend(fontsize=7)
    predicted = dict.fromkeys((r["committer"], r["store"]) for r in data["plan"]["table"])
    for committer, store in predicted:
        series = sorted(
            (r["files"], r["job_commit_s"])
            for r in data["plan"]["table"]
            if r["committer"] == committer and r["store"] == store
        )
        a2.plot(
            [s[0] for s in series],
            [s[1] for s in series],
            marker="o",
            linestyle="--",
            label=f"{committer} sim:{store}",
        )
    _log_axes(a2)
    a2.set_xlabel("files (100 per task)")
    a2.set_ylabel("predicted job commit s")
    a2.grid(alpha=0.3)
    a2.legend(fontsize=7)
    save(fig, "plan.png")

    # markers: requests and write time
    m = data["markers"]["results"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(7, 3.2))
    a1.bar([r["markers"] for r in m], [r["marker_ops"] for r in m], color=["C0", "C1"])
    a1.set_yscale("log")
    a1.set_ylabel("marker store requests")
    a2.bar([r["markers"] for r in m], [r["write_s"] for r in m], color=["C0", "C1"])
    a2.set_ylabel("total write s")
    save(fig, "markers.png")

    # shuffle: time and read sizes per method
    s = data["shuffle"]["results"]
    labels = [f"{r['method']}\n({r['engine']})" for r in s]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    a1.bar(labels, [r["wall_s"] for r in s], color=[f"C{i}" for i in range(len(s))])
    a1.axhline(data["shuffle"]["disk_limit_s"], color="grey", linestyle=":", label="disk limit")
    a1.set_ylabel("wall s")
    a1.legend(fontsize=7)
    a1.tick_params(axis="x", labelsize=7)
    ours = [r for r in s if r["reduce_reads"]]
    a2.bar(
        [f"{r['method']}\n({r['engine']})" for r in ours],
        [r["avg_read_bytes"] / 1024 for r in ours],
        color="C2",
    )
    a2.set_yscale("log")
    a2.set_ylabel("average reduce-side read KiB")
    a2.tick_params(axis="x", labelsize=7)
    save(fig, "shuffle.png")

    # shuffle scale: time per GiB and peak worker memory against size, per method
    scale = data["shuffle"].get("scale", {}).get("scale", [])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    for i, key in enumerate(sorted({(r["engine"], r["method"]) for r in scale})):
        rows = [r for r in scale if (r["engine"], r["method"]) == key]
        label = f"{key[1]} ({key[0]})"
        a1.plot(
            [r["gib"] for r in rows],
            [r["s_per_gib"] for r in rows],
            "o-",
            color=f"C{i}",
            label=label,
        )
        a2.plot(
            [r["gib"] for r in rows],
            [r["worker_rss_mib"] or 0 for r in rows],
            "o-",
            color=f"C{i}",
            label=label,
        )
    a1.set_xlabel("GiB shuffled")
    a1.set_ylabel("s per GiB")
    a1.set_ylim(bottom=0)
    a1.legend(fontsize=7)
    a2.set_xlabel("GiB shuffled")
    a2.set_ylabel("peak MiB of the largest worker")
    a2.set_ylim(bottom=0)
    save(fig, "shuffle_scale.png")
    return made
