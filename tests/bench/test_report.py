"""`bench report --quick` writes the page, its plots and its JSON from one run."""

from __future__ import annotations

import json

from dataferry.bench.report import ReportSpec, run_report


def test_quick_report_writes_page_and_plots(tmp_path):
    out = tmp_path / "docs" / "benchmarks"
    (tmp_path / "docs").mkdir()
    data = run_report(ReportSpec(out=str(out), quick=True))
    page = (tmp_path / "docs" / "benchmarks.md").read_text()
    for section in ("Job commit time", "Planning past one machine", "Write markers", "Shuffle"):
        assert section in page
    for png in ("commit.png", "plan.png", "markers.png", "shuffle.png"):
        assert (out / png).stat().st_size > 5000
        assert f"(benchmarks/{png})" in page
    assert json.loads((out / "report.json").read_text())["plan"] == data["plan"]
    assert data["plan"]["checks"][0]["predicted_requests"] > 0
    assert f"**{data['write']['ratio']}x**" in page  # numbers come from the run
