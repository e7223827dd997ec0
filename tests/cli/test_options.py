"""The root options (--version, --debug) and the options that keep commands safe: demo's
--force and --keep, bench report's --out, --quiet, and uploads abort's default age."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest
from typer.testing import CliRunner

import dataferry
from dataferry.cli import app

runner = CliRunner()
SMALL_DEMO = ["demo", "--rows", "2000", "--tasks", "6", "--workers", "1", "--no-tour"]


@pytest.fixture
def temp_dir(tmp_path, monkeypatch):
    """The temporary directory commands use, empty to begin with."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def run_dataferry(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DATAFERRY_")}
    return subprocess.run(
        [sys.executable, "-m", "dataferry.cli", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_version():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"dataferry {dataferry.__version__}"


def test_debug_shows_the_traceback_then_the_one_line():
    plain = run_dataferry("success", "missing")
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    for done in (
        run_dataferry("--debug", "success", "missing"),
        run_dataferry("success", "missing", DATAFERRY_DEBUG="1"),
    ):
        assert done.returncode == 1
        assert done.stderr.startswith("Traceback") and ", in success" in done.stderr
        assert done.stderr.splitlines()[-1] == plain.stderr.strip()


def test_progress_is_labelled_and_quiet_hides_it(temp_dir, monkeypatch):
    import io

    from rich.console import Console

    from dataferry.cli import output

    shown = io.StringIO()
    monkeypatch.setattr(output, "stderr", Console(file=shown, force_terminal=True, width=120))
    res = runner.invoke(app, SMALL_DEMO)
    assert res.exit_code == 0, res.output
    assert "demo: tasks committed" in shown.getvalue() and "6 of 6" in shown.getvalue()
    assert "/?" not in shown.getvalue()
    shown.seek(0)
    shown.truncate()
    res = runner.invoke(app, [*SMALL_DEMO, "--quiet"])
    assert res.exit_code == 0 and "rows read back" in res.output
    assert shown.getvalue() == ""
    for command in (
        ["verify", "crash"],
        ["bench", "commit"],
        ["bench", "hive"],
        ["bench", "markers"],
        ["bench", "shuffle"],
        ["bench", "write"],
        ["bench", "report"],
        ["plan", "commit"],
    ):
        assert "--quiet" in runner.invoke(app, [*command, "--help"]).output, command


def test_a_step_without_a_known_total_is_counted_not_questioned(monkeypatch):
    import io
    import time

    from rich.console import Console

    from dataferry.cli import output

    shown = io.StringIO()
    monkeypatch.setattr(output, "stderr", Console(file=shown, force_terminal=True, width=120))
    with output.progress("bench hive", None) as steps:
        steps.step("one-by-one")
        steps.step("append")
        time.sleep(0.3)  # the display refreshes ten times a second
    assert "bench hive: append" in shown.getvalue() and "1 done" in shown.getvalue()
    assert "/?" not in shown.getvalue()


def test_demo_removes_its_temporary_output_unless_kept(temp_dir):
    res = runner.invoke(app, [*SMALL_DEMO, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["rows_read"] == 2000 and data["kept"] == ""
    assert list(temp_dir.iterdir()) == []
    res = runner.invoke(app, [*SMALL_DEMO, "--keep", "--json"])
    assert res.exit_code == 0, res.output
    kept = json.loads(res.stdout)["kept"]
    assert os.path.dirname(kept) == str(temp_dir)
    assert os.path.exists(os.path.join(kept, "sales", "_SUCCESS"))


def test_demo_refuses_a_destination_that_holds_data_unless_forced(tmp_path, temp_dir):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "precious.txt").write_text("keep me")
    res = runner.invoke(app, [*SMALL_DEMO, "--dest", str(dest)])
    assert res.exit_code == 1 and "--force" in res.output
    assert [p.name for p in dest.iterdir()] == ["precious.txt"]
    res = runner.invoke(app, [*SMALL_DEMO, "--dest", str(dest), "--force", "--json"])
    assert res.exit_code == 0, res.output
    assert not (dest / "precious.txt").exists() and (dest / "_SUCCESS").exists()
    assert list(temp_dir.iterdir()) == []  # the user's destination stays, the rest goes


def test_demo_into_an_empty_destination_keeps_it(tmp_path, temp_dir):
    dest = tmp_path / "empty"
    dest.mkdir()
    res = runner.invoke(app, [*SMALL_DEMO, "--dest", str(dest)])
    assert res.exit_code == 0, res.output
    assert (dest / "_SUCCESS").exists()


def test_bench_report_writes_where_told_or_into_a_new_temporary_directory(
    tmp_path, temp_dir, monkeypatch
):
    import dataferry.bench.report as report

    def fake_run_report(spec, progress=None):  # the suite itself is tested in tests/bench
        progress("commit")
        with open(f"{spec.out}.md", "w") as page:
            page.write("# benchmarks\n")
        return {"seconds": 0.0}

    monkeypatch.setattr(report, "run_report", fake_run_report)
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["bench", "report", "--quick"])
    assert res.exit_code == 0, res.output
    (made,) = temp_dir.iterdir()
    page = made / "benchmarks.md"
    assert page.exists() and str(page) in res.output.replace("\n", "")
    assert not (tmp_path / "docs").exists()
    out = tmp_path / "site" / "bench"
    (tmp_path / "site").mkdir()
    res = runner.invoke(app, ["bench", "report", "--quick", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "site" / "bench.md").exists()


def test_uploads_abort_spares_young_uploads_by_default(tmp_path):
    from dataferry.store import open_store

    url = f"sim:s3:{tmp_path / 's3'}"
    store = open_store(url)
    store.initiate_upload("t/part-0.parquet")
    res = runner.invoke(app, ["uploads", "abort", url])
    assert res.exit_code == 0, res.output
    assert "aborted 0" in res.output and len(store.list_uploads("")) == 1
    res = runner.invoke(app, ["uploads", "abort", url, "--older-than", "0"])
    assert res.exit_code == 0 and "aborted 1" in res.output
    assert store.list_uploads("") == []
