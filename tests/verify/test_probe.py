"""check-store gives the right answers on local disk, memory, store models and S3."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dataferry.cli import app
from dataferry.verify.probe import probe_store


def test_local_disk(tmp_path):
    report = probe_store(str(tmp_path))
    m = report.measured()
    assert m["atomic_o1_file_rename"] and m["atomic_o1_dir_rename"] and m["conditional_create"]
    assert m["multipart_upload"] is False and report.recommended == "manifest"
    assert list(tmp_path.iterdir()) == []  # the scratch prefix is gone


def test_memory():
    m = probe_store("memory://probe-test").measured()
    assert m["consistent_listing"] and m["conditional_create"] and not m["etags"]


def test_copy_based_model_is_detected(tmp_path):
    report = probe_store(f"sim:gcs:{tmp_path}")
    m = report.measured()
    assert m["atomic_o1_file_rename"] is False and m["atomic_o1_dir_rename"] is False
    assert report.recommended == "none"


def test_s3(s3_url):
    res = CliRunner().invoke(app, ["check-store", s3_url, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    measured = {k: v["value"] for k, v in data["measured"].items()}
    assert measured["multipart_upload"] and measured["etags"] and measured["conditional_create"]
    assert measured["atomic_o1_dir_rename"] is False
    assert data["recommended"] == "magic"


def test_probe_removes_the_directories_it_had_to_create(tmp_path):
    (tmp_path / "kept").mkdir()
    report = probe_store(str(tmp_path / "kept" / "new" / "deeper"))
    assert report.recommended == "manifest"
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    assert list((tmp_path / "kept").iterdir()) == []


def test_check_store_table_shows_declared_beside_measured(tmp_path):
    res = CliRunner().invoke(app, ["check-store", str(tmp_path)])
    assert res.exit_code == 0, res.output
    row = next(line for line in res.output.splitlines() if "atomic_o1_file_rename" in line)
    assert row.count("yes") == 2  # measured, and declared as atomic_file_rename
    assert "recommended committer: manifest" in res.output
