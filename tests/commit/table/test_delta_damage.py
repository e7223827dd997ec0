"""A damaged Delta log is named, never built upon: a 0-byte, truncated or garbage commit file,
a checkpoint that is not whole, a `_last_checkpoint` naming a checkpoint that is gone, and
whatever deltalake itself cannot read give one error naming the file and the table, before
any file is written, and the table is left exactly as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.job.cleanup import cleanup_destination
from dataferry.errors import DataferryError, DestinationError, TableDamaged
from dataferry.store import open_store

deltalake = pytest.importorskip("deltalake")


def data(start: int = 0, n: int = 4) -> pa.Table:
    return pa.table(
        {"x": pa.array(range(start, start + n), pa.int64()), "p": ["a", "b"] * (n // 2)}
    )


def table(tmp_path: Path) -> Path:
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), data(), partition_by=["p"])
    deltalake.write_deltalake(str(t), data(4), partition_by=["p"], mode="append")
    return t


def commit_file(t: Path, version: int) -> Path:
    return t / "_delta_log" / f"{version:020d}.json"


def snapshot(t: Path) -> dict[str, bytes]:
    return {str(p.relative_to(t)): p.read_bytes() for p in sorted(t.rglob("*")) if p.is_file()}


def damage(kind: str, f: Path) -> None:
    whole = f.read_bytes()
    if kind == "empty":
        f.write_bytes(b"")
    elif kind == "truncated":
        f.write_bytes(whole[: len(whole) // 2])
    elif kind == "garbage":
        f.write_bytes(b"\x00\xff not a log \x01\n")
    elif kind == "not-an-action":
        f.write_bytes(b'{"hello": 1}\n' + whole)


WRITES = {
    "write_dataset": lambda t: dataferry.write_dataset(
        data(100), str(t), committer="delta", mode="append", partition_by=["p"]
    ),
    "write_deltalake": lambda t: dataferry.write_deltalake(
        str(t), data(100), mode="append", partition_by=["p"]
    ),
    "overwrite": lambda t: dataferry.write_dataset(
        data(100), str(t), committer="delta", mode="overwrite", partition_by=["p"]
    ),
}


@pytest.mark.parametrize("how", list(WRITES))
@pytest.mark.parametrize("kind", ["empty", "truncated", "garbage", "not-an-action"])
def test_a_damaged_latest_commit_is_named_and_nothing_is_written(tmp_path, kind, how):
    """Broken, a 0-byte latest commit is read as an empty one (its rows vanish) and the job
    commits version 2 on top of it; a truncated one fails with deltalake's error, which names
    no file."""
    t = table(tmp_path)
    damage(kind, commit_file(t, 1))
    before = snapshot(t)
    with pytest.raises(TableDamaged, match=r"_delta_log/0{19}1\.json") as caught:
        WRITES[how](t)
    assert str(t) in str(caught.value) and "\n" not in str(caught.value)
    assert snapshot(t) == before


def test_an_empty_commit_below_the_latest_is_named_too(tmp_path):
    t = table(tmp_path)
    deltalake.write_deltalake(str(t), data(8), partition_by=["p"], mode="append")
    commit_file(t, 1).write_bytes(b"")
    with pytest.raises(TableDamaged, match=r"0{19}1\.json is empty"):
        WRITES["write_dataset"](t)


def test_the_error_for_an_empty_latest_commit_says_how_to_go_back(tmp_path):
    t = table(tmp_path)
    commit_file(t, 1).write_bytes(b"")
    with pytest.raises(TableDamaged, match="remove the file \\(the table is then version 0\\)"):
        WRITES["write_dataset"](t)


def checkpointed(tmp_path: Path) -> tuple[Path, Path]:
    t = table(tmp_path)
    deltalake.DeltaTable(str(t)).create_checkpoint()
    return t, next((t / "_delta_log").glob("*.checkpoint.parquet"))


@pytest.mark.parametrize("kind", ["empty", "garbage"])
def test_a_damaged_checkpoint_is_named(tmp_path, kind):
    """Broken, deltalake's "file size of 7 is less than footer" names neither the file nor
    the table."""
    t, checkpoint = checkpointed(tmp_path)
    checkpoint.write_bytes(b"" if kind == "empty" else b"garbage")
    before = snapshot(t)
    with pytest.raises(TableDamaged, match=checkpoint.name):
        WRITES["write_dataset"](t)
    assert snapshot(t) == before


def test_a_last_checkpoint_naming_a_missing_checkpoint_is_named(tmp_path):
    t, checkpoint = checkpointed(tmp_path)
    checkpoint.unlink()
    with pytest.raises(TableDamaged, match="_last_checkpoint names checkpoint version 1"):
        WRITES["write_dataset"](t)


def test_a_garbage_last_checkpoint_is_only_a_hint(tmp_path):
    """deltalake ignores an unreadable `_last_checkpoint` (it lists the log instead): so does
    dataferry, and the write goes through. Broken, a stale hint would block every write."""
    t, _ = checkpointed(tmp_path)
    (t / "_delta_log" / "_last_checkpoint").write_bytes(b"{not json")
    WRITES["write_dataset"](t)
    assert deltalake.DeltaTable(str(t)).to_pyarrow_table().num_rows == 12


def test_what_deltalake_cannot_read_is_named_with_the_table_and_its_latest_commit(tmp_path):
    """A commit that is whole JSON but that deltalake refuses (a schema it cannot parse):
    its error is given with the table and the latest commit file, without a backtrace."""
    t = table(tmp_path)
    first = commit_file(t, 0)
    lines = [json.loads(line) for line in first.read_text().splitlines()]
    for action in lines:
        if "metaData" in action:
            action["metaData"]["schemaString"] = "not a schema"
    first.write_text("\n".join(json.dumps(a) for a in lines))
    before = snapshot(t)
    with pytest.raises(
        DestinationError, match=r"cannot be read \(its latest commit: .*0{19}1\.json\)"
    ):
        WRITES["write_dataset"](t)
    assert snapshot(t) == before


def test_damage_appearing_while_the_job_runs_stops_its_commit(tmp_path):
    """The log is checked again when the commit is planned, before it is decided: a commit
    file emptied while the tasks wrote stops the job, and no version is made on top of it.
    Its files stay marked (what references them cannot be read, so nothing is deleted) until
    the log is repaired; then `dataferry cleanup` removes them. Broken, the job commits
    version 2 over the empty version 1."""
    t = table(tmp_path)
    before = snapshot(t)
    whole = commit_file(t, 1).read_bytes()
    with pytest.raises(DataferryError, match=r"0{19}1\.json is empty"):
        dataferry.write_dataset(
            data(100),
            str(t),
            committer="delta",
            mode="append",
            partition_by=["p"],
            before_job_commit=lambda job: damage("empty", commit_file(t, 1)),
        )
    assert not commit_file(t, 2).exists()
    commit_file(t, 1).write_bytes(whole)  # repaired
    cleanup_destination(open_store(str(t)), older_than_s=0)
    assert snapshot(t) == before


def test_a_v2_checkpoint_in_json_is_a_checkpoint_the_hint_may_name(tmp_path):
    """Checkpoints come as Parquet, multi-part Parquet and V2 (`<N>.checkpoint.<uuid>.json`):
    a `_last_checkpoint` naming a V2 one is not damage. Broken, every write to such a table
    is refused ("names checkpoint version 1, which is not in _delta_log")."""
    from dataferry.commit.table.delta.log import check_log

    t, checkpoint = checkpointed(tmp_path)
    checkpoint.rename(checkpoint.with_name(f"{1:020d}.checkpoint.{'a' * 8}-uuid.json"))
    assert check_log(open_store(str(t))) == 1


def test_deltalakes_error_at_the_commit_names_the_table_and_its_latest_commit(
    tmp_path, monkeypatch
):
    """Whatever deltalake raises while the transaction is built on the table's snapshot
    (here: made to fail, with the Rust backtrace its errors carry) is given with the table
    and the commit it was to follow, on one line. Broken, the raw deltalake message,
    backtrace and all."""
    t = table(tmp_path)

    def refuse(*args, **kwargs):
        raise deltalake.exceptions.DeltaError("Generic error: no\n   0: <unknown>\n   1: <unknown>")

    from dataferry.commit.table.delta.committer import DeltaFormat

    checked = DeltaFormat.check_input

    def check_then_fail(self, *args, **kwargs):  # the table read at the commit fails
        checked(self, *args, **kwargs)
        monkeypatch.setattr(deltalake.DeltaTable, "protocol", refuse)

    monkeypatch.setattr(DeltaFormat, "check_input", check_then_fail)
    with pytest.raises(DataferryError) as caught:
        WRITES["write_dataset"](t)
    text = str(caught.value)
    assert f"Delta table {t.as_uri()} did not take the job's transaction" in text
    assert f"{1:020d}.json" in text and "<unknown>" not in text
