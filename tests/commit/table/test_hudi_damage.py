"""Damage to a Hudi table's `hoodie.properties` (empty, garbage, cut short, a checksum that
does not match) is named, with the table, before anything is written: never read as a table
without partitions or keys."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.errors import ConfigError, DestinationError

pytest.importorskip("hudi")


def write(data, dest, partition_by):
    return dataferry.write_dataset(
        data,
        dest,
        partition_by=list(partition_by),
        committer="hudi",
        committer_options={"table_name": "t", "record_key": "x"},
        mode="append",
    )


def frame(xs, day) -> pa.Table:
    return pa.table({"x": pa.array(xs, pa.int64()), "day": [day] * len(xs)})


def snapshot(path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda good: b"", id="empty"),
        pytest.param(lambda good: b"\x00\xff\x13PAR1 garbage \x88", id="garbage-bytes"),
        pytest.param(lambda good: b"this is not\na properties file\n", id="garbage-text"),
        pytest.param(lambda good: good[: len(good) // 2], id="truncated"),
        pytest.param(lambda good: good.rsplit(b"\n", 2)[0] + b"\n", id="cut-at-a-line"),
        pytest.param(
            lambda good: good.replace(b"hoodie.table.name=t", b"hoodie.table.name=u"),
            id="bad-checksum",
        ),
    ],
)
@pytest.mark.parametrize("partition_by", [(), ("day",)])
def test_a_damaged_hoodie_properties_is_named_before_anything_is_written(
    tmp_path, damage, partition_by
):
    """A `hoodie.properties` that does not parse is damage: one error naming the file and the
    table, nothing written; broken, it is read as an unpartitioned, keyless table (the advice
    to give partition_by=[] commits a file at the table's root)."""
    path = tmp_path / "t"
    write(frame([1, 2], "d1"), str(path), ["day"])
    props = path / ".hoodie" / "hoodie.properties"
    props.write_bytes(damage(props.read_bytes()))
    before = snapshot(path)
    with pytest.raises(DestinationError) as err:
        write(frame([3], "d1"), str(path), partition_by)
    message = str(err.value)
    assert ".hoodie/hoodie.properties is damaged" in message and str(path) in message
    assert "partition_by=[]" not in message
    assert snapshot(path) == before


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x00\x01garbage", id="garbage"),
        pytest.param(b'{"partitionToWriteStats": {"": [{"fileId"', id="truncated"),
        pytest.param(b"[1, 2]", id="not-an-object"),
    ],
)
def test_a_damaged_commit_is_named_and_not_built_upon(tmp_path, damage):
    """A completed instant whose metadata does not parse: the next write fails naming the
    file and the table, nothing written; broken, a raw JSON error, or a commit on top of a
    version no reader can read."""
    path = tmp_path / "t"
    write(frame([1, 2], "d1"), str(path), ["day"])
    (commit,) = (path / ".hoodie").glob("*.commit")
    commit.write_bytes(damage)
    before = snapshot(path)
    with pytest.raises(DestinationError) as err:
        write(frame([3], "d1"), str(path), ["day"])
    message = str(err.value)
    assert f".hoodie/{commit.name} is damaged" in message and str(path) in message
    assert snapshot(path) == before


def test_missing_properties_under_a_timeline_is_damage(tmp_path):
    """`hoodie.properties` gone while the timeline has completed instants: refused, never a
    new table made over the old one's files."""
    path = tmp_path / "t"
    write(frame([1, 2], "d1"), str(path), ["day"])
    (path / ".hoodie" / "hoodie.properties").unlink()
    before = snapshot(path)
    with pytest.raises(DestinationError, match=r"hoodie\.properties is damaged: it is missing"):
        write(frame([3], "d1"), str(path), ["day"])
    assert snapshot(path) == before


def test_other_table_versions_and_types_are_refused(tmp_path):
    """A merge-on-read table or one of another version: refused, never written with
    version 6 instants."""
    path = tmp_path / "t"
    write(frame([1, 2], "d1"), str(path), ["day"])
    props = path / ".hoodie" / "hoodie.properties"
    good = props.read_bytes()
    props.write_bytes(good.replace(b"COPY_ON_WRITE", b"MERGE_ON_READ"))
    with pytest.raises(ConfigError, match="MERGE_ON_READ: dataferry writes copy-on-write"):
        write(frame([3], "d1"), str(path), ["day"])
    props.write_bytes(good.replace(b"hoodie.table.version=6", b"hoodie.table.version=8"))
    with pytest.raises(ConfigError, match="table version 8"):
        write(frame([3], "d1"), str(path), ["day"])


def test_what_hudi_rs_cannot_read_is_named_with_the_table(tmp_path):
    """A base file that is not Parquet: the committer's read (the referee's) names the
    table; broken, hudi-rs's raw error, or a Rust panic no `except Exception` catches."""
    from dataferry.commit.table.hudi import HudiCommitter, HudiConfig
    from dataferry.store import open_store

    path = tmp_path / "t"
    write(frame([1, 2], "d1"), str(path), ["day"])
    (base,) = path.rglob("*.parquet")
    base.write_bytes(b"not parquet at all")
    reader = HudiCommitter(open_store(str(path)), HudiConfig())
    with pytest.raises(DestinationError, match=f"hudi-rs cannot read Hudi table .*{path.name}"):
        reader.read_rows()
