"""split_by_partition groups rows exactly, whatever the number of partition combinations."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

import dataferry
from dataferry.dataset import partition
from dataferry.dataset.partition import split_by_partition
from dataferry.dataset.rows import Rows, gather_pieces


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


# --- names the destination can hold -----------------------------------------------------------


def test_a_value_too_long_for_a_file_name_fails_on_the_driver_before_any_task(tmp_path):
    from dataferry.errors import ConfigError

    long = "x" * 300  # p=<300 bytes>: more than the 255 a local name may have
    table = pa.table({"p": ["ok", long], "v": [1, 2]})
    events: list[str] = []
    with pytest.raises(ConfigError) as e:
        dataferry.write_dataset(
            table, str(tmp_path / "out"), partition_by=["p"], on_event=lambda *a: events.append(a)
        )
    message = str(e.value)
    assert "partition column 'p'" in message and "302 bytes" in message and "255" in message
    assert "(300 characters)" in message and long not in message  # the value, shortened
    assert events == [] and not (tmp_path / "out" / "_temporary").exists()


def test_a_stream_whose_later_batch_has_one_fails_after_one_attempt_not_four(tmp_path):
    from dataferry.engine import LocalEngine
    from dataferry.errors import ConfigError

    schema = pa.schema([("p", pa.string()), ("v", pa.int64())])
    batches = [
        pa.record_batch([pa.array(["ok"]), pa.array([1])], schema=schema),
        pa.record_batch([pa.array(["é" * 200]), pa.array([2])], schema=schema),  # 402 bytes
    ]
    events: list[str] = []
    with pytest.raises(ConfigError, match=r"partition column 'p'.*402 bytes.*255 bytes"):
        dataferry.write_dataset(
            pa.RecordBatchReader.from_batches(schema, iter(batches)),
            str(tmp_path / "out"),
            partition_by=["p"],
            engine=LocalEngine(workers=1, executor="threads"),  # max_attempts=4
            on_event=lambda e, t, a: events.append(e),
        )
    # found by the task's one attempt, or by the stream's sample before the task starts
    assert events.count("attempt_started") <= 1 and events.count("attempt_failed") <= 1


def test_object_stores_bound_the_whole_key():
    from dataferry.errors import ConfigError
    from dataferry.store import open_store

    limits = partition.name_limits(open_store("memory://bucket/dest"))
    assert limits.name == 255 and limits.directory == 1024 - 256 - len("dest") - 1
    columns, values = ("a", "b", "c", "d"), ["y" * 200] * 4  # 4 names of 202 bytes
    assert partition.partition_dir(columns, values)  # fine where directories nest freely
    with pytest.raises(ConfigError, match=r"partition column 'a'.*811 bytes.*763 bytes"):
        partition.partition_dir(columns, values, limits)
    with pytest.raises(ConfigError, match="'a/b' cannot be part of a directory name"):
        partition.partition_dir(("a/b",), [1])


# --- the split cut into row slices, side by side ----------------------------------------------


def _rows_by_partition(table: pa.Table, cols: tuple[str, ...], threads: int) -> dict[str, list]:
    """The `v` of each partition directory's rows, sorted ('' and null are two partitions
    of one directory: Hive's, unless a table format keeps them apart)."""
    got: dict[str, list] = {}
    for d, rows in partition.partition_rows(table, cols, threads=threads):
        got.setdefault(d, []).extend(rows.gather().column("v").to_pylist())
    return {d: sorted(v) for d, v in got.items()}


def _order(table: pa.Table, cols: tuple[str, ...], threads: int) -> tuple:
    """`_partition_order` with its order as one array of row numbers."""
    order, starts, ends, directories = partition._partition_order(table, cols, threads)
    return order.take(0, len(order)), starts, ends, directories


def _sorted_reference(table: pa.Table, cols: tuple[str, ...]) -> dict[str, list]:
    return {d: sorted(v) for d, v in _reference(table, cols).items()}


def _zoo_table(n: int, seed: int = 3) -> pa.Table:
    """Partition columns of every kind the split meets: ints, strings with nulls, a
    categorical (dictionary) with nulls and chunks numbering its values differently."""
    rng = np.random.default_rng(seed)
    words = ["x", "y", None, "z/w", ""]
    cat_values = [["b", "a", None][i] for i in rng.integers(0, 3, n)]
    half = n // 2
    first = pa.array(cat_values[:half]).dictionary_encode()
    second = pa.DictionaryArray.from_arrays(
        pa.array([{"a": 0, "b": 1, None: None}[v] for v in cat_values[half:]], pa.int32()),
        pa.array(["a", "b"]),
    )
    return pa.table(
        {
            "a": pa.array(rng.integers(0, 7, n)),
            "s": pa.array([words[i] for i in rng.integers(0, len(words), n)]),
            "cat": pa.chunked_array([first, second]),
            "v": pa.array(np.arange(n)),
        }
    )


@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize(
    "cols", [("a",), ("s",), ("cat",), ("a", "s", "cat")], ids=["int", "str", "cat", "all"]
)
def test_split_in_slices_is_the_one_thread_split(monkeypatch, threads, cols):
    """Each slice split on one of the threads, then merged: the very same partitions, in the
    same order, each with the same rows in input order as the one-thread split. A merge that
    dropped, duplicated or reordered rows would write them to the wrong files, or lose them.
    There are twice as many slices as threads (a thread done first takes the next slice, so
    the split does not wait on one slow thread's large slice); broken, as many as threads."""
    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 50)  # small data, still cut in slices
    table = _zoo_table(3001)
    slices = []
    names = set()
    real = partition._split_slice

    def spy(t, c, o):
        slices.append(o)
        names.add(threading.current_thread().name)
        return real(t, c, o)

    monkeypatch.setattr(partition, "_split_slice", spy)
    one = _order(table, cols, 1)
    assert slices == []
    many = _order(table, cols, threads)
    assert len(slices) == 2 * threads  # it did cut the rows, two slices a thread
    assert len(names) <= threads
    for a, b in zip(one, many, strict=True):
        np.testing.assert_array_equal(a, b)
    got = _rows_by_partition(table, cols, threads)
    assert got == _sorted_reference(table, cols)
    assert sorted(v for rows in got.values() for v in rows) == list(range(3001))


def test_split_in_slices_with_one_partition_and_with_no_rows(monkeypatch):
    """One partition spread over every slice is one group of all rows; an empty table has
    no partitions (and no slices)."""
    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 10)
    table = pa.table({"k": ["only"] * 1000, "v": np.arange(1000)})
    got = _rows_by_partition(table, ("k",), 4)
    assert got == {"k=only": list(range(1000))}
    assert partition.partition_rows(table.slice(0, 0), ("k",), threads=4) == []


def test_split_in_slices_with_many_partitions_and_a_compacted_key(monkeypatch):
    """More combinations than the key holds (renumbered), and partitions found in some
    slices only: still every row once, in its partition, in input order."""
    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 10)
    monkeypatch.setattr(partition, "_COMPACT_LIMIT", 4)
    rng = np.random.default_rng(11)
    n = 4000
    table = pa.table(
        {
            "a": pa.array(
                np.concatenate([rng.integers(0, 50, n // 2), rng.integers(40, 90, n // 2)])
            ),
            "b": pa.array(rng.integers(0, 9, n)),
            "v": pa.array(np.arange(n)),
        }
    )
    _assert_slices_split_as_one_thread(table, ("a", "b"))


@pytest.mark.parametrize("threads", [1, 3])
def test_a_float_column_with_nan_and_null_over_several_chunks(monkeypatch, threads):
    """NaN and null are partitions of their own, whether the table comes in one chunk or
    several, split on one thread or in slices (pyarrow cannot unify the chunks' dictionaries
    holding both: the write failed on such a column)."""
    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 2)
    nan = float("nan")
    values = pa.chunked_array(
        [pa.array([nan, None, 1.0, -0.0]), pa.array([None, nan, 2.0]), pa.array([1.0, nan])]
    )
    table = pa.table({"f": values, "v": range(9)})
    got = _rows_by_partition(table, ("f",), threads)
    assert got == {
        "f=nan": [0, 5, 8],
        "f=__HIVE_DEFAULT_PARTITION__": [1, 4],
        "f=1.0": [2, 7],
        "f=-0.0": [3],
        "f=2.0": [6],
    }


def test_each_slice_is_sorted_on_its_own_thread_not_all_rows_on_the_driver(monkeypatch):
    """The slices number their rows by partition and sort them, each on a split thread; the
    driver only merges their groups (no sort of all the rows, no array of every row's
    partition): the same partitions, directories and rows as the one-thread split. Sorting
    every row on the driver kept one core idle for a tenth of the write."""
    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 50)
    table = _zoo_table(3001)
    sorts: list[tuple[int, str]] = []
    real_sort = partition.pc.sort_indices

    def sort(a, *x, **k):
        sorts.append((len(a), threading.current_thread().name))
        return real_sort(a)

    monkeypatch.setattr(partition.pc, "sort_indices", sort)
    many = partition.partition_rows(table, ("a", "s", "cat"), threads=3)
    assert sorted(n for n, _ in sorts) == [500] * 5 + [501]  # each slice's rows, once
    assert all(name.startswith("dataferry-split") for _, name in sorts)
    monkeypatch.undo()
    one = partition.partition_rows(table, ("a", "s", "cat"), threads=1)
    assert [d for d, _ in many] == [d for d, _ in one]
    for (_, x), (_, y) in zip(many, one, strict=True):
        np.testing.assert_array_equal(x.indices, y.indices)


def test_any_range_of_the_slices_order_is_that_of_the_one_thread_order(monkeypatch):
    """The tasks take ranges of the order cut anywhere (the plan cuts partitions at a task's
    share), across segments and slices: each range's rows are those of the one-thread
    order, and a task's pieces gathered together are those rows."""
    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 50)
    table = _zoo_table(3001)
    one = _order(table, ("a", "s"), 1)[0]
    order = partition._partition_order(table, ("a", "s"), 4)[0]
    assert len(order.runs) == 4 * partition.SLICES_PER_THREAD and len(order) == 3001
    rng = np.random.default_rng(2)
    for start, stop in [(0, 3001), (0, 0), (3001, 3001), *rng.integers(0, 3002, (200, 2))]:
        start, stop = sorted((int(start), int(stop)))
        np.testing.assert_array_equal(order.take(start, stop), one[start:stop])
    rows = Rows(table, order, 0, 3001)
    pieces = [("p", rows.slice(5, 700)), ("q", rows.slice(705).slice(10, 900))]
    got = gather_pieces(pieces)
    assert got[0][1].column("v").to_pylist() == one[5:705].tolist()
    assert got[1][1].column("v").to_pylist() == one[715:1615].tolist()


def test_split_in_slices_with_a_wide_key_not_renumbered(monkeypatch):
    """More combinations than 16-bit keys hold but not renumbered (a wide key, sparse in each
    slice): each slice's rows still get their partition's rank, in input order."""
    monkeypatch.setattr(partition, "_PARALLEL_ROWS", 10)
    rng = np.random.default_rng(5)
    n = 3000
    table = pa.table(
        {
            "a": pa.array(rng.integers(0, 400, n)),
            "b": pa.array(rng.integers(0, 400, n)),
            "v": pa.array(np.arange(n)),
        }
    )
    _assert_slices_split_as_one_thread(table, ("a", "b"))


def _assert_slices_split_as_one_thread(table: pa.Table, columns: tuple[str, ...]) -> None:
    """Split in 3 slices: the same order, bounds and directories as on one thread, and the
    rows of each partition in input order."""
    one = _order(table, columns, 1)
    many = _order(table, columns, 3)
    for x, y in zip(one, many, strict=True):
        np.testing.assert_array_equal(x, y)
    assert _rows_by_partition(table, columns, 3) == _sorted_reference(table, columns)
