"""What Java Hudi needs of a table beyond what hudi-rs reads, checked without a JVM (the
Spark interop tests, tests/interop/test_spark_tables.py, read the same tables with Hudi's
own Spark reader): a `.hoodie_partition_metadata` in every partition, and no metadata table
left stale by a write dataferry cannot keep it for."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.table.hudi.timeline import PARTITION_METADATA, PROPERTIES, parse_properties
from dataferry.errors import DestinationError


def rows(start: int, n: int = 4) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "day": [f"d{i % 2}" for i in ids], "v": [i / 2 for i in ids]})


def write(dest, data, partition_by=("day",), metadata_table=True, **kw):
    options = {"record_key": ["id"], "metadata_table": metadata_table}
    return dataferry.write_dataset(
        data, str(dest), committer="hudi", partition_by=list(partition_by),
        committer_options=options, progress=False, **kw,
    )  # fmt: skip


def metadata_of(path) -> dict[str, str]:
    return parse_properties(path.read_bytes())


def test_every_partition_has_hudis_partition_metadata(tmp_path):
    """Java Hudi (without its metadata table) lists a table's partitions by this file: broken,
    Spark, Trino or Hive read no row of a partition dataferry made."""
    write(tmp_path / "t", rows(0))
    found = (tmp_path / "t").rglob(PARTITION_METADATA)
    # (the metadata table's partitions, under .hoodie, have theirs too)
    first = sorted(p.parent.name for p in found if ".hoodie" not in p.parts)
    assert first == ["day=d0", "day=d1"]
    meta = metadata_of(tmp_path / "t" / "day=d0" / PARTITION_METADATA)
    instants = sorted(p.name.split(".")[0] for p in (tmp_path / "t/.hoodie").glob("*.commit"))
    assert meta == {"commitTime": instants[0], "partitionDepth": "1"}
    # a later commit keeps the partition's first record
    write(tmp_path / "t", rows(10), mode="append")
    assert metadata_of(tmp_path / "t" / "day=d0" / PARTITION_METADATA)["commitTime"] == instants[0]


def test_a_table_without_partitions_has_it_at_its_root(tmp_path):
    """Broken, Java Hudi reads nothing of an unpartitioned dataferry table."""
    write(tmp_path / "t", rows(0), partition_by=())
    assert metadata_of(tmp_path / "t" / PARTITION_METADATA)["partitionDepth"] == "0"


@pytest.mark.parametrize("listed", ["files", "files,record_index"])
def test_a_metadata_table_dataferry_cannot_keep_is_refused_before_any_write(tmp_path, listed):
    """Java Hudi's readers list files from the metadata table: one dataferry cannot update (a
    partition it does not write, or none on storage) is refused; broken (dataferry committing
    anyway), Spark would not see dataferry's rows."""
    write(tmp_path / "t", rows(0), metadata_table=False)
    props = tmp_path / "t" / PROPERTIES
    text = props.read_text().replace("hoodie.table.metadata.partitions=\n", "")
    props.write_text(text + f"hoodie.table.metadata.partitions={listed}\n")
    before = sorted(p.name for p in (tmp_path / "t").rglob("*") if p.is_file())
    with pytest.raises(DestinationError, match="metadata table"):
        write(tmp_path / "t", rows(10), mode="append")
    assert sorted(p.name for p in (tmp_path / "t").rglob("*") if p.is_file()) == before
