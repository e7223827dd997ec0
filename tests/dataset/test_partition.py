"""split_by_partition groups rows exactly, whatever the number of partition combinations."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from dataferry.dataset import partition
from dataferry.dataset.partition import split_by_partition


def _reference(table: pa.Table, columns: tuple[str, ...]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for row in table.to_pylist():
        d = partition.partition_dir(columns, [row[c] for c in columns])
        groups.setdefault(d, []).append(row["v"])
    return groups


@pytest.mark.parametrize("radix_limit", [1 << 16, 0], ids=["radix", "merge-sort"])
@pytest.mark.parametrize("compact_limit", [1 << 31, 4], ids=["wide-key", "compacted"])
def test_split_matches_row_by_row_grouping(monkeypatch, radix_limit, compact_limit):
    monkeypatch.setattr(partition, "_RADIX_LIMIT", radix_limit)
    monkeypatch.setattr(partition, "_COMPACT_LIMIT", compact_limit)
    rng = np.random.default_rng(7)
    n = 5000
    table = pa.table(
        {
            "a": pa.array(rng.integers(0, 13, n)),
            "b": pa.array([["x", "y", None, "z/w"][i] for i in rng.integers(0, 4, n)]),
            "c": pa.array(rng.integers(0, 9, n)),
            "v": pa.array(np.arange(n)),
        }
    )
    cols = ("a", "b", "c")
    got = {d: rows.column("v").to_pylist() for d, rows in split_by_partition(table, cols)}
    # every partition once, its rows in input order, and no partition column left in the data
    assert got == _reference(table, cols)
    for _, rows in split_by_partition(table, cols):
        assert rows.column_names == ["v"]


def test_dictionary_columns_with_nulls_and_different_chunk_dictionaries():
    """pandas and polars categoricals arrive as dictionary arrays: a null has no code of its
    own there, and two chunks may number the same value differently."""
    a = pa.array(["x", "y", None, "x"]).dictionary_encode()
    b = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int32()), pa.array(["y", "x"]))
    table = pa.table({"c": pa.chunked_array([a, b]), "v": list(range(7))})
    got = {d: sorted(rows.column("v").to_pylist()) for d, rows in split_by_partition(table, ["c"])}
    assert got == {"c=x": [0, 3, 5, 6], "c=y": [1, 4], "c=__HIVE_DEFAULT_PARTITION__": [2]}
