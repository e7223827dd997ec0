"""`bench table --frame zoo`: the report's shape on a tiny zoo, a failing or wrong reader
reported (never crashing the bench), refused columns found and left out of every writer's
frame, and the value comparison the readers are judged by. Correctness only: no assertion is
on a time."""

from __future__ import annotations

import dataclasses
import json
import math

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import dataferry.bench.table_peers as peers
from dataferry.bench.same_values import differences
from dataferry.bench.table_zoo import ZooBenchSpec, first_line, refusals, run_zoo_bench, zoo_frame
from dataferry.cli import app
from dataferry.errors import ConfigError
from dataferry.verify.type_zoo import ZOO_COLUMNS

ROWS = 40
# columns every writer of Delta takes today (a whole-frame write: no column-by-column probe)
FEW = ("id", "part", "ts_utc", "u8", "cat", "s", "ls", "dec", "lst", "st", "mp")


def _delta(**kw) -> dict:
    spec = ZooBenchSpec(rows=ROWS, repeats=1, formats=("delta",), columns=FEW, **kw)
    return run_zoo_bench(spec)


def test_zoo_report_shape():
    """A user reads, per writer, its wall time, files, ratio to the format's own writer and
    each reader's verdict; if the shape breaks, `--json` consumers and the table break."""
    data = _delta()
    assert data["benchmark"] == "table" and data["mode"] == "zoo"
    assert not data["failed"], data["failed"]
    by = {r["writer"]: r for r in data["results"]}
    assert set(by) == {"deltalake", "dataferry delta"}
    for r in by.values():
        assert r["format"] == "delta" and r["peer"] == "deltalake"
        assert r["rows"] == ROWS and r["files"] >= 4 and r["partitions"] == 4
        assert len(r["runs_s"]) == 1 and r["wall_s"] > 0 and r["vs_peer"] > 0
        assert [x["reader"] for x in r["readers"]] == ["deltalake", "polars.read_delta"]
        assert all(x["status"] in ("same", "differs", "fails") for x in r["readers"])
    assert by["deltalake"]["vs_peer"] == 1.0
    # the own writer's table, read by its own library, is the expected values: "same"; polars
    # reads the same table (large strings, maps as lists of structs): "same" by value
    assert [x["status"] for x in by["deltalake"]["readers"]] == ["same", "same"]
    (fmt,) = data["formats"]
    assert fmt["columns"] == list(FEW) and fmt["left_out"] == []
    assert fmt["expected_from"] == "deltalake's table as deltalake reads it"
    json.dumps(data)


def test_a_failing_reader_is_reported_not_raised(monkeypatch):
    """A reader that raises (or panics, as hudi-rs does) is listed as failing with its error's
    first line; broken, the whole bench would stop at the first unreadable table."""

    def broken(dest: str, setting) -> pa.Table:
        raise RuntimeError("cannot read this\nsecond line of a backtrace")

    def wrong(dest: str, setting) -> pa.Table:  # the table, with one column's values changed
        t = peers._deltalake_read(dest, setting)
        return t.set_column(t.column_names.index("s"), "s", pa.array(["x"] * t.num_rows))

    row = dataclasses.replace(
        peers.PEERS["delta"],
        readers=(
            peers.PEERS["delta"].readers[0],
            peers.Reader("broken", broken),
            peers.Reader("wrong", wrong),
        ),
    )
    monkeypatch.setitem(peers.PEERS, "delta", row)
    data = _delta()
    assert not data["failed"], data["failed"]
    for r in data["results"]:
        verdicts = {x["reader"]: x for x in r["readers"]}
        assert verdicts["broken"]["status"] == "fails"
        assert verdicts["broken"]["detail"] == "RuntimeError: cannot read this"
        assert verdicts["wrong"]["status"] == "differs"
        assert verdicts["wrong"]["detail"] == "s (values)"
        assert r["wall_s"] > 0  # timed all the same


def test_refused_columns_are_named_and_left_out(monkeypatch):
    """A column the format's own writer refuses is named with the writer's reason and left out
    of every writer's frame (the comparison is on the columns all accept); broken, the peer
    would be listed as failed, or dataferry timed on more columns than its peer."""
    real = peers.PEERS["delta"].write

    def picky(data: pa.Table, dest: str, setting) -> None:
        if "u8" in data.column_names:
            raise TypeError("u8: unsigned integers are not taken\nmore")
        real(data, dest, setting)

    monkeypatch.setitem(
        peers.PEERS, "delta", dataclasses.replace(peers.PEERS["delta"], write=picky)
    )
    data = _delta()
    assert not data["failed"], data["failed"]
    (fmt,) = data["formats"]
    assert fmt["left_out"] == [
        {
            "column": "u8",
            "refused_by": {"deltalake": "TypeError: u8: unsigned integers are not taken"},
        }
    ]
    assert "u8" not in fmt["columns"] and len(fmt["columns"]) == len(FEW) - 1
    by = {r["writer"]: r for r in data["results"]}
    assert by["deltalake"]["refused"] == [
        {"column": "u8", "reason": "TypeError: u8: unsigned integers are not taken"}
    ]
    assert by["dataferry delta"]["refused"] == []
    assert all(x["status"] == "same" for x in by["deltalake"]["readers"])


def test_refusals_probe(tmp_path):
    """`refusals` names each refused column alone; a writer refusing only a combination, or
    even the key columns, is refused as a whole ("*")."""
    sample = zoo_frame(4)

    def no(*names):
        def write(data, dest):
            if any(n in data.column_names for n in names):
                raise ValueError(f"no {names}")

        return write

    assert refusals(no(), sample, str(tmp_path / "a")) == []
    found = refusals(no("u64", "mp"), sample, str(tmp_path / "b"))
    assert [r.column for r in found] == ["u64", "mp"]
    assert refusals(no("id"), sample, str(tmp_path / "c"))[0].column == "*"

    def pair(data, dest):
        if {"u8", "u16"} <= set(data.column_names):
            raise ValueError("not both")

    (whole,) = refusals(pair, sample, str(tmp_path / "d"))
    assert whole.column == "*" and whole.reason == "ValueError: not both"


def test_differences_by_value():
    """Readers are judged by value: a reader's own way of holding a value (large strings,
    decoded categoricals, signed integers, microseconds, the instant of a zoned time, maps
    as key/value lists, NaN) is the same value; a changed value, a lost zone, a lost row or
    column is not. Broken, every reader would be "DIFFERS", or a wrong one "ok"."""
    zoo = zoo_frame(8)
    cols = list(ZOO_COLUMNS)
    assert differences(zoo, zoo, cols, "id") == []
    assert math.isnan(zoo.column("f64")[1].as_py())  # the zoo's NaN is compared
    held = pa.table(
        {
            "id": zoo.column("id").cast(pa.int32()),
            "ls": zoo.column("ls").cast(pa.string()),
            "cat": zoo.column("cat").cast(pa.large_string()),
            "u64": zoo.column("u64").cast(pa.int64()),
            "ts_ns": zoo.column("ts_ns").cast(pa.timestamp("us")),
            "ts_tz": zoo.column("ts_tz").cast(pa.timestamp("us", "UTC")),
            "f64": zoo.column("f64"),
            "mp": pa.array(
                [[{"key": k, "value": v} for k, v in m] for m in zoo.column("mp").to_pylist()],
                pa.large_list(pa.struct([("key", pa.string()), ("value", pa.int64())])),
            ),
        }
    ).take(list(reversed(range(8))))  # in another order: matched by id
    same = list(held.column_names)
    assert differences(zoo, held, same, "id") == []
    local = held.column("ts_tz").cast(pa.timestamp("us"))  # the zone dropped
    naive = held.set_column(held.column_names.index("ts_tz"), "ts_tz", local)
    assert differences(zoo, naive, same, "id") == [
        "ts_tz (timestamp[us] for timestamp[us, tz=UTC])"
    ]
    changed = held.set_column(held.column_names.index("ls"), "ls", pa.array(["z"] * 8))
    assert differences(zoo, changed, same, "id") == ["ls (values)"]
    assert differences(zoo, held.slice(1), same, "id") == ["7 rows of 8"]
    assert differences(zoo, held.drop_columns(["mp"]), same, "id") == ["missing column mp"]


def test_first_line():
    assert first_line(ValueError("a\nb")) == "ValueError: a"


def test_cli_zoo_json_and_refusals_of_options():
    """`--frame zoo --json` carries the figures; the zoo runs on the embedded engine only."""
    runner = CliRunner()
    args = ("--frame", "zoo", "--rows", "20", "--repeats", "1", "--formats", "hudi", "--json")
    res = runner.invoke(app, ["bench", "table", *args])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output[res.output.index("{") :])
    (row,) = data["results"]
    assert row["writer"] == "dataferry hudi" and row["vs_peer"] is None and row["peer"] is None
    assert [x["reader"] for x in row["readers"]] == ["hudi-rs"]
    assert "no Python writer" in data["formats"][0]["no_peer"]
    with pytest.raises(ConfigError):
        ZooBenchSpec(columns=("part", "u8"))
    res = runner.invoke(app, ["bench", "table", "--frame", "zoo", "--engines", "dask"])
    assert res.exit_code != 0


def test_an_own_writer_refusing_everything_fails_alone(monkeypatch):
    """The format's own writer refusing the zoo outright is listed as failed; dataferry is
    still timed and judged against the input frame. Broken, one writer's refusal would stop
    the format's whole run, or dataferry would be judged against nothing."""

    def refuse(data: pa.Table, dest: str, setting) -> None:
        raise OSError("no space left\nat line 2")

    monkeypatch.setitem(
        peers.PEERS, "delta", dataclasses.replace(peers.PEERS["delta"], write=refuse)
    )
    data = _delta()
    (failed,) = data["failed"]
    assert failed["writer"] == "deltalake" and failed["reason"] == (
        "refuses the zoo: OSError: no space left"
    )
    (row,) = data["results"]
    assert row["writer"] == "dataferry delta" and row["wall_s"] > 0 and row["vs_peer"] is None
    assert data["formats"][0]["expected_from"] == "the input frame (deltalake's write failed)"
    # deltalake reads dataferry's table with the input's values (polars.read_delta may not
    # today: dataferry logs u8 as a signed byte while the files hold unsigned ones)
    assert row["readers"][0] == {"reader": "deltalake", "status": "same", "detail": ""}
