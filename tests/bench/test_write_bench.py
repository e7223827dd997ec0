"""`bench write`: every installed writer writes every row it is given, a missing library is a
skipped writer, and the stream mode reports peak RSS and files. Small sizes, no timing
assertions."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import pytest
from typer.testing import CliRunner

import dataferry
import dataferry.dask
from dataferry.bench.write import (
    TABLE_WRITERS,
    StreamBenchSpec,
    WriteBenchSpec,
    _measure,
    _Steps,
    run_stream_bench,
    run_write_bench,
)
from dataferry.bench.writers import Group, Writer
from dataferry.cli import app
from dataferry.errors import ConfigError

ROWS = 20_000


def test_table_mode_every_installed_writer_writes_every_row():
    seen = []
    data = run_write_bench(
        WriteBenchSpec(rows=ROWS, repeats=1, codecs=("default",)),
        progress=lambda *step: seen.append(step),
    )
    assert data["mode"] == "table" and not data["failed"]
    by = {r["writer"]: r for r in data["results"]}
    # each writer ran or was listed as skipped, none both
    assert set(by) | {s["writer"] for s in data["skipped"]} == set(TABLE_WRITERS)
    assert not set(by) & {s["writer"] for s in data["skipped"]}
    assert {"dataferry", "dataferry manifest", "pyarrow"} <= set(by)
    for r in by.values():
        assert r["rows"] == ROWS
        assert r["files"] >= 40 and r["partitions"] == 40  # 8 days x 5 regions
        assert r["bytes"] > 0 and len(r["runs_s"]) == 1 and r["wall_s"] > 0
        assert r["file_bytes"]["min"] <= r["file_bytes"]["median"] <= r["file_bytes"]["max"]
        assert r["group"] == "table" and r["baseline"] == "dataferry"
    assert by["dataferry"]["vs_dataferry"] == 1.0
    assert data["ratio"] == round(by["dataferry"]["wall_s"] / by["pyarrow"]["wall_s"], 3)
    assert by["dataferry manifest"]["detail"] == "committer manifest"
    # one labelled step a run (a warm-up, then the timed one), numbered, and the count is
    # right at the end
    assert [k for _label, k, _n in seen] == list(range(1, 2 * len(by) + 1))
    assert seen[-1][2] == 2 * len(by)
    assert "warm-up" in seen[0][0] and "run 1 of 1" in seen[len(by)][0]
    json.dumps(data)


def test_every_writer_at_equal_codecs_and_at_its_defaults_with_the_cores_it_kept_busy():
    """One run reports each writer at its own defaults and at each codec all are told to
    use, in one rotation, each with its CPU seconds and cores busy, and compares it with
    dataferry at the same codec. Broken, a reader would compare dataferry's snappy with
    polars' zstd (the parity that hid polars' lead), or not see idle cores."""
    seen: list[str] = []
    spec = WriteBenchSpec(
        rows=ROWS,
        repeats=2,
        writers=("dataferry", "dataferry manifest", "pyarrow", "polars", "duckdb", "deltalake"),
        codecs=("default", "snappy", "zstd-3"),
    )
    data = run_write_bench(spec, progress=lambda label, k, n: seen.append(label))
    assert not data["failed"], data["failed"]
    rows = {(r["writer"], r["codec"]): r for r in data["results"]}
    ran = {r["writer"] for r in data["results"]}
    assert {"dataferry", "pyarrow"} <= ran
    for codec in ("default", "snappy", "zstd-3"):
        for writer in ran - {"dataferry manifest"}:
            r = rows[(writer, codec)]
            assert r["rows"] == ROWS and len(r["runs_s"]) == 2
            assert r["cpu_s"] > 0 and r["cores"] > 0
            assert r["cores"] == pytest.approx(
                statistics.median(d / w for d, w in zip(r["cpu_runs_s"], r["runs_s"], strict=True)),
                abs=0.02,
            )
        base = rows[("dataferry", codec)]["wall_s"]
        assert rows[("pyarrow", codec)]["vs_dataferry"] == round(
            rows[("pyarrow", codec)]["wall_s"] / base, 3
        )
    # the manifest committer only at the defaults
    assert [c for w, c in rows if w == "dataferry manifest"] == ["default"]
    # the codecs interleave in one rotation: a zstd-3 run comes before the last snappy one
    timed = [label for label in seen if "warm-up" not in label]
    assert min(i for i, x in enumerate(timed) if "zstd-3" in x) < max(
        i for i, x in enumerate(timed) if "snappy" in x
    )
    assert any("codec default: each writer's own" in n for n in data["notes"])
    assert data["ratio"] == round(
        rows[("dataferry", "default")]["wall_s"] / rows[("pyarrow", "default")]["wall_s"], 3
    )
    json.dumps(data)


def test_the_writers_write_the_codec_they_are_told(tmp_path):
    """Every writer writes the codec and level it is told (or its own default): a writer
    left at its default would make the equal-codec comparison a comparison of codecs."""
    import pyarrow.parquet as pq

    from dataferry.bench.table_writers import parse_codec, table_group
    from dataferry.dataset.synthetic import sales_table

    table = sales_table(2000)
    group = table_group(table, ("day",), codecs=(parse_codec("zstd-3"), parse_codec("lz4")))
    assert {w.codec for w in group.writers} == {"zstd-3", "lz4"}
    for w in group.writers:
        dest = str(tmp_path / w.key.replace(" ", "-"))
        data = w.prepare(table) if w.prepare else table
        w.write(data, dest)
        if w.close:
            w.close(data)
        path = next(p for p in sorted(os.listdir(dest)) if p.startswith("day="))
        folder = os.path.join(dest, path)
        name = next(f for f in os.listdir(folder) if f.endswith(".parquet"))
        column = pq.ParquetFile(os.path.join(folder, name)).metadata.row_group(0).column(0)
        want = {"zstd-3": "ZSTD", "lz4": ("LZ4", "LZ4_RAW")}[w.codec]
        assert column.compression in want, (w.key, column.compression)
    with pytest.raises(ConfigError, match="codec 'zstd-x'"):
        parse_codec("zstd-x")
    with pytest.raises(ConfigError, match="names one codec twice"):
        WriteBenchSpec(codecs=("zstd-3", "ZSTD-3"))


def test_every_writer_is_warmed_up_then_timed_in_rotated_order(tmp_path):
    """The writer listed first must not pay the process's first-call costs alone (it made
    the ratio to pyarrow flip between runs): each writer runs once untimed, then the timed
    rounds rotate the order; medians and spread are reported."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    calls: list[str] = []

    def writer(name):
        def write(data, dest):
            calls.append(name)
            time.sleep(0.02 + 0.01 * (len(calls) % 3))  # runs of different lengths
            os.makedirs(dest, exist_ok=True)
            pq.write_table(data, f"{dest}/part.parquet")

        return Writer(name, write)

    table = pa.table({"x": list(range(10))})
    group = Group("table", "a", [writer("a"), writer("b"), writer("c")], data=table)
    rows = _measure(group, 10, 3, str(tmp_path), _Steps(None, 12), [], warmup=True)
    assert calls[:3] == ["a", "b", "c"]  # the warm-up round, untimed
    assert calls[3:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # rotated each round
    for r in rows:
        assert len(r["runs_s"]) == 3  # the warm-up is not among the timed runs
        runs = r["runs_s"]
        assert r["spread_s"] == pytest.approx(max(runs) - min(runs), abs=2e-4)
        assert r["spread_pct"] == pytest.approx(100 * r["spread_s"] / r["wall_s"], rel=0.1)


def test_a_missing_library_is_a_skipped_writer(monkeypatch):
    monkeypatch.setitem(sys.modules, "polars", None)  # import polars now raises ImportError
    monkeypatch.setitem(sys.modules, "deltalake", None)
    data = run_write_bench(
        WriteBenchSpec(rows=5_000, repeats=1, writers=("dataferry", "polars", "deltalake"))
    )
    # dataferry at each codec; each missing writer listed once, not once per codec
    assert [(r["writer"], r["codec"]) for r in data["results"]] == [
        ("dataferry", "default"),
        ("dataferry", "snappy"),
        ("dataferry", "zstd-3"),
    ]
    assert len(data["skipped"]) == 2
    reasons = {s["writer"]: s["reason"] for s in data["skipped"]}
    assert reasons == {
        "polars": "polars is not installed",
        "deltalake": "deltalake is not installed",
    }
    assert data["ratio"] is None  # no pyarrow run to compare with


def test_a_writer_that_writes_nothing_is_failed_not_timed(tmp_path):
    def nothing(_data, _dest):
        return None

    failed: list[dict[str, str]] = []
    group = Group("table", "dataferry", [Writer("lazy", nothing)], data=None)
    rows = _measure(group, 100, 3, str(tmp_path), _Steps(None, 3), failed)
    assert rows == []
    assert failed == [
        {"writer": "lazy", "group": "table", "reason": "ConfigError: read back 0 rows of 100"}
    ]


def test_stream_mode_reports_rss_and_files():
    spec = StreamBenchSpec(
        size=4 << 20, partitions=6, batch_rows=16_384, writers=("dataferry", "pyarrow", "dask")
    )
    data = run_stream_bench(spec)
    assert data["mode"] == "stream" and not data["failed"], data["failed"]
    assert data["spec"]["rows"] == data["spec"]["batches"] * 16_384
    assert data["spec"]["batches"] > 1  # a stream, not one batch
    assert "VmHWM" in data["rss_method"]
    by = {r["writer"]: r for r in data["results"]}
    assert {"dataferry", "pyarrow"} <= set(by)
    for r in by.values():
        assert r["rows"] == data["spec"]["rows"]
        assert r["partitions"] == 6 and r["files"] >= 6
        assert 0 < r["file_bytes"]["min"] <= r["file_bytes"]["median"] <= r["file_bytes"]["max"]
        assert r["rss_peak_bytes"] >= r["rss_self_bytes"] >= r["rss_start_bytes"] > 10 << 20
        # its own process: not the parent's peak, which fork and exec would carry along
        assert r["rss_peak_bytes"] < 4 << 30
        assert r["rss_children_bytes"] == 0 or r["rss_children_bytes"] is None  # no psutil
        assert r["process_s"] >= r["wall_s"] > 0
    assert by["dataferry"]["vs_dataferry"] == 1.0


def test_stream_mode_skips_what_it_cannot_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "duckdb", None)
    monkeypatch.delattr(dataferry.dask, "to_parquet", raising=False)
    data = run_stream_bench(
        StreamBenchSpec(size=1 << 20, partitions=2, writers=("duckdb", "dataferry.dask"))
    )
    assert data["results"] == [] and data["failed"] == []
    reasons = {s["writer"]: s["reason"] for s in data["skipped"]}
    assert reasons["duckdb"] == "duckdb is not installed"
    assert "to_parquet" in reasons["dataferry.dask"]


def test_unknown_writer_is_refused():
    with pytest.raises(ConfigError, match="unknown writers"):
        WriteBenchSpec(writers=("spark",))
    with pytest.raises(ConfigError, match="unknown writers"):
        StreamBenchSpec(writers=("polars",))  # polars takes no stream of batches here


def test_cli_json_and_refusals():
    runner = CliRunner()
    res = runner.invoke(
        app,
        ["bench", "write", "--rows", "5000", "--repeats", "1", "--writers", "dataferry,pyarrow"],
    )
    assert res.exit_code == 0, res.output
    assert "x dataferry" in res.output and "pyarrow" in res.output
    res = runner.invoke(
        app,
        [
            *("bench", "write", "--rows", "5000", "--repeats", "1", "--writers", "pyarrow"),
            *("--codecs", "zstd-3", "--json"),
        ],
    )
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.output)["results"]
    assert row["writer"] == "pyarrow" and row["rows"] == 5000 and row["vs_dataferry"] is None
    assert row["codec"] == "zstd-3" and row["cores"] > 0
    res = runner.invoke(app, ["bench", "write", "--codecs", "brotli-9"])
    assert res.exit_code == 1 and "codec 'brotli-9'" in res.output
    res = runner.invoke(app, ["bench", "write", "--stream", "1MiB", "--dask"])
    assert res.exit_code == 1


def test_the_profile_cuts_dataferrys_write_into_parts_next_to_the_peers():
    from dataferry.bench.write_profile import PARTS, ProfileSpec, run_write_profile

    data = run_write_profile(ProfileSpec(rows=ROWS, repeats=1, compression="zstd"))
    assert not data["failed"]
    parts = {p["part"]: p["s"] for p in data["parts"]}
    assert list(parts) == [key for key, _ in PARTS]
    # the write's own figures reach the profile: it encoded and split rows, planned, committed
    assert parts["encode_s"] > 0 and parts["split_s"] > 0 and parts["plan_split_s"] > 0
    assert parts["job_commit_s"] > 0 and parts["tasks_s"] > 0
    writers = {w["writer"]: w for w in data["writers"]}
    assert {"dataferry", "pyarrow"} <= set(writers)
    assert writers["dataferry"]["vs_dataferry"] == 1.0
    assert all(w["cpu_s"] > 0 and len(w["runs_s"]) == 1 for w in writers.values())
    with pytest.raises(ConfigError, match="compression"):
        ProfileSpec(compression="brotli-max")


def test_the_task_result_says_where_its_time_went(tmp_path):
    from dataferry.dataset.synthetic import sales_table

    result = dataferry.write_dataset(sales_table(20_000), str(tmp_path / "o"), partition_by=["day"])
    (task,) = result.run.results.values()
    assert task["encode_s"] > 0 and task["split_s"] > 0
    assert set(result.stats["plan_s"]) >= {"split_partitions", "measure", "total"}
