"""`catalog list|partitions` read a catalog without changing it, and find a table by name or
by location."""

from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from dataferry.cli import app
from dataferry.commit.hive.catalog import PartitionRecord, open_catalog

runner = CliRunner()


def make_catalog(tmp_path):
    path = tmp_path / "warehouse" / "catalog.sqlite"
    table_dir = tmp_path / "warehouse" / "sales"
    open_catalog(str(path)).record_load(
        "sales",
        f"file://{table_dir}",
        [PartitionRecord("day=1", f"file://{table_dir}/day=1", 3, 300)],
        "job_1",
    )
    return path, table_dir


def test_list_reads_the_catalog_without_changing_it(tmp_path):
    path, _ = make_catalog(tmp_path)
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    res = runner.invoke(app, ["catalog", "list", str(path), "--json"])
    assert res.exit_code == 0, res.output
    (table,) = json.loads(res.stdout)
    assert table["name"] == "sales" and table["files"] == 3
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
    assert sorted(os.listdir(path.parent)) == ["catalog.sqlite"]  # no journal left either


def test_partitions_by_name_or_by_location(tmp_path, monkeypatch):
    path, table_dir = make_catalog(tmp_path)
    monkeypatch.chdir(tmp_path)
    for table in ("sales", str(table_dir), f"file://{table_dir}/", "warehouse/sales"):
        res = runner.invoke(app, ["catalog", "partitions", str(path), table, "--json"])
        assert res.exit_code == 0, (table, res.output)
        assert [p["spec"] for p in json.loads(res.stdout)] == ["day=1"]
    res = runner.invoke(app, ["catalog", "partitions", str(path), "warehouse/other"])
    assert res.exit_code == 1 and "its tables: sales" in res.output


def test_open_catalog_read_only_creates_nothing(tmp_path):
    import pytest

    from dataferry.errors import NotFound

    with pytest.raises(NotFound, match="no such file"):
        open_catalog(str(tmp_path / "sub" / "catalog.sqlite"), create=False)
    assert list(tmp_path.iterdir()) == []
