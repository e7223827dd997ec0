"""`bench table`: the report's shape at a tiny size, a committer this version lacks skipped
rather than failed, and concurrent appenders landing every commit. Correctness only: no
assertion is on a time."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dataferry.bench.table import TableBenchSpec, registered, run_table_bench
from dataferry.bench.table_concurrency import ConcurrencySpec, run_concurrency_bench
from dataferry.cli import app

ROWS = 2_000


def _iceberg() -> tuple[str, ...]:
    return ("iceberg",) if registered("iceberg") is None else ()


def test_write_mode_report_shape():
    formats = ("delta", *_iceberg())
    data = run_table_bench(
        TableBenchSpec(rows=ROWS, repeats=1, engines=("embedded", "dask"), formats=formats)
    )
    assert data["benchmark"] == "table" and data["mode"] == "write"
    by = {r["writer"]: r for r in data["results"]}
    failed = {f["writer"]: f["reason"] for f in data["failed"]}
    # dataferry's Delta committer is registered: it runs on both engines, and reads back whole
    for name in ("dataferry delta", "dataferry.dask delta"):
        assert name in by, failed
    assert "deltalake" in by, failed
    for r in by.values():
        assert r["rows"] == ROWS and r["partitions"] == 8  # 8 days
        assert len(r["runs_s"]) == 1 and r["wall_s"] > 0 and r["spread_s"] == 0
        assert r["format"] in formats and r["group"] in ("embedded", "dask")
        if r["writer"].startswith("dataferry"):
            assert r["detail"] == f"committer {r['format']}"
            assert r["job_commit_s"] > 0 and 0 < r["job_commit_pct"] < 100
        else:
            assert r["job_commit_s"] is None
    assert by["deltalake"]["vs_fastest"] == 1.0 and by["dataferry delta"]["baseline"] == "deltalake"
    if "pyiceberg" in by:
        assert by["pyiceberg"]["vs_fastest"] == 1.0
    # a writer is run, skipped or failed: never two of those
    seen = [r["writer"] for r in data["results"]] + list(failed)
    assert len(seen) == len(set(seen))
    json.dumps(data)


def test_the_engines_rows_have_their_ratio_without_the_embedded_engine():
    """`--engines dask`: the single-process writers still run (the rows' baseline), not
    dataferry's embedded writers."""
    data = run_table_bench(
        TableBenchSpec(rows=ROWS, repeats=1, engines=("dask",), formats=("delta",))
    )
    by = {r["writer"]: r for r in data["results"]}
    assert set(by) == {"deltalake", "dataferry.dask delta"}, data["failed"]
    assert by["dataferry.dask delta"]["baseline"] == "deltalake"
    assert by["dataferry.dask delta"]["vs_fastest"] > 0


def test_a_committer_not_registered_is_skipped(monkeypatch):
    import dataferry.commit.registry as registry

    monkeypatch.delitem(registry.KNOWN, "hudi", raising=False)
    data = run_table_bench(
        TableBenchSpec(rows=ROWS, repeats=1, engines=("embedded",), formats=("hudi",))
    )
    assert data["results"] == [] and data["failed"] == []
    (skip,) = data["skipped"]
    assert skip["writer"] == "dataferry hudi" and "not registered" in skip["reason"]


def test_concurrent_appenders_land_every_commit():
    formats = ("delta", *_iceberg(), "hudi")
    spec = ConcurrencySpec(processes=2, commits=2, rows=50, formats=formats, peers=False)
    data = run_concurrency_bench(spec)
    assert not data["failed"], data["failed"]
    assert [r["format"] for r in data["results"]] == list(formats)
    for r in data["results"]:
        assert r["errors"] == [] and r["ok"], r
        assert r["commits_landed"] == r["commits_reported"] == r["commits_expected"] == 4
        assert r["rows_found"] == r["distinct_ids"] == r["rows_expected"] == 5 * 50


def test_the_appenders_go_only_once_every_one_is_ready():
    """The timed run starts when every process has imported and made its rows, not as the
    first one has (the others' start-up would be in the commits per second); one that is
    not ready in time does not hold the rest back for ever."""
    import threading

    from dataferry.bench.table_concurrency import _start_together

    go = threading.Event()

    class Ready:
        def __init__(self, answers: list[bool]) -> None:
            self.answers, self.go_seen = answers, []

        def acquire(self, timeout: float) -> bool:
            self.go_seen.append(go.is_set())
            return self.answers.pop(0)

    ready = Ready([True, True, True])
    assert _start_together(ready, go, 3, deadline=0.0)
    assert ready.go_seen == [False, False, False] and go.is_set()
    go.clear()
    late = Ready([True, False])
    assert not _start_together(late, go, 3, deadline=0.0)
    assert late.go_seen == [False, False] and go.is_set()


def test_cli_tables_and_json():
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "bench",
            "table",
            "--rows",
            str(ROWS),
            "--repeats",
            "1",
            *("--engines", "embedded"),
            *("--formats", "delta"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "x fastest" in res.output and "deltalake" in res.output
    res = runner.invoke(
        app,
        [
            "bench",
            "table",
            "--quick",
            "--concurrency",
            "--formats",
            "delta",
            "--json",
            *("--processes", "2", "--commits", "1"),
        ],
    )
    assert res.exit_code == 0, res.output
    ours, peer = json.loads(res.output)["results"]  # and deltalake's own appends beside
    assert ours["writer"] == "dataferry" and peer["writer"] == "deltalake"
    assert ours["commits_landed"] == ours["commits_expected"] == 2 and ours["ok"]
    assert peer["commits_landed"] + peer["error_count"] == peer["commits_expected"] == 2
