"""`bench report --quick` writes the page, its plots and its JSON from one run."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from dataferry.bench.report import S3_SERVER, ReportSpec, run_report


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    """One quick report for the module's tests (it takes most of a minute)."""
    root = tmp_path_factory.mktemp("report")
    out = root / "docs" / "benchmarks"
    (root / "docs").mkdir()
    endpoint_before = os.environ.get("AWS_ENDPOINT_URL")
    data = run_report(ReportSpec(out=str(out), quick=True))
    return out, data, endpoint_before


def test_quick_report_writes_page_and_plots(quick_report):
    out, data, endpoint_before = quick_report
    page = (out.parent / "benchmarks.md").read_text()
    for section in ("Job commit time", "Planning past one machine", "Write markers", "Shuffle"):
        assert section in page
    for png in ("commit.png", "plan.png", "markers.png", "shuffle.png", "shuffle_scale.png"):
        assert (out / png).stat().st_size > 5000
        assert f"(benchmarks/{png})" in page
    assert json.loads((out / "report.json").read_text())["plan"] == data["plan"]
    assert data["plan"]["checks"][0]["predicted_requests"] > 0
    assert f"**{data['write']['ratio']}x**" in page  # numbers come from the run
    # where the write's time goes, next to polars: dataferry's parts from its own figures
    assert "Where the write's time goes" in page
    parts = {p["part"]: p["s"] for p in data["write"]["profile"]["parts"]}
    assert parts["encode_s"] > 0
    assert f"| tasks: encode, compress, write (thread-s) | {parts['encode_s']} | - |" in page
    # the magic committer ran on the S3 server, and the server was stopped and forgotten after
    (magic,) = [r for r in data["commit"] if r["store"] == S3_SERVER]
    assert magic["committer"] == "magic" and magic["requests"] > 0
    assert f"| {S3_SERVER} | magic | 20 |" in page
    assert os.environ.get("AWS_ENDPOINT_URL") == endpoint_before
    # the shuffle's scale curve: one row per size, its figures on the page
    scale = data["shuffle"]["scale"]["scale"]
    assert [r["method"] for r in scale] == ["push", "push"] and scale[0]["vs_smallest"] == 1.0
    assert f"| local | push | {scale[1]['gib']:g} | {scale[1]['wall_s']:.2f} |" in page


def test_only_some_sections_run_again_and_the_rest_come_from_the_last_report(
    quick_report, tmp_path
):
    out = tmp_path / "benchmarks"
    shutil.copytree(quick_report[0], out)
    earlier = json.loads((out / "report.json").read_text())
    again = run_report(ReportSpec(out=str(out), quick=True, only=("markers",)))
    assert again["commit"] == earlier["commit"] and again["write"] == earlier["write"]
    assert again["markers"] != earlier["markers"]  # measured anew
    saved = json.loads((out / "report.json").read_text())
    assert saved["markers"] == again["markers"] and saved["plan"] == earlier["plan"]
    assert saved["shuffle"] == earlier["shuffle"]
    assert (tmp_path / "benchmarks.md").read_text().count("## ") >= 5  # the whole page again


def test_only_needs_an_earlier_report(tmp_path):
    from dataferry.errors import ConfigError

    with pytest.raises(ConfigError, match="no earlier report"):
        run_report(ReportSpec(out=str(tmp_path / "b"), quick=True, only=("shuffle",)))
    with pytest.raises(ConfigError, match="unknown report sections"):
        run_report(ReportSpec(out=str(tmp_path / "b"), quick=True, only=("nope",)))
