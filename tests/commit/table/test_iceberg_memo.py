"""The Iceberg committer's transaction (`commit/table/iceberg/memo.py`): its metadata built once
per change of the table or of the staged updates, and still every staged update's."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dataferry
from dataferry.commit.lookup import committer_by_name
from dataferry.commit.table.iceberg.committer import IcebergFormat
from dataferry.store import open_store

pytestmark = pytest.mark.filterwarnings("ignore::Warning")


def test_metadata_is_built_once_per_change(tmp_path) -> None:
    url = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["a", "b"]})
    for _ in range(2):
        dataferry.write_dataset(rows, url, partition_by=["day"], committer="iceberg", mode="append")
    fmt = committer_by_name("iceberg", open_store(url)).format
    assert isinstance(fmt, IcebergFormat)
    tbl = fmt.table()
    tx = fmt.evolved(tbl)
    first = tx.table_metadata
    assert first is tbl.metadata  # nothing staged: the table's own, not a deep copy
    tx.set_properties(marked="yes")  # a staged update: built with it, once
    staged = tx.table_metadata
    assert staged is not first and staged.properties["marked"] == "yes"
    assert tx.table_metadata is staged  # not rebuilt (and deep-copied) while nothing changed
    assert "marked" not in first.properties and "marked" not in tbl.metadata.properties
    tx._table.metadata = tbl.metadata.model_copy(update={"properties": {"other": "1"}})
    assert tx.table_metadata.properties == {"other": "1", "marked": "yes"}  # the table's, anew
