"""The Arrow block codec: the hash that puts a key where Dask puts it, the split by one take,
blocks without a schema of their own (and with one where dictionaries need it), and the checks
that keep a block from being decoded with another map's schema; a map's pandas frame taken
as Arrow in place, as `from_pandas` would give it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dataferry.engine.shuffle.codec import (
    REUSED_UP_TO,
    decode_blocks,
    encode_blocks,
    from_pandas,
    glibc_reuses_buffers,
    partition_ids,
    pool_for,
    shuffle_schema,
    split_batches,
    to_pandas,
)
from dataferry.errors import EngineError
from dataferry.shuffle.blocks import Block

N = 7  # output partitions


def dask_rule(df: pd.DataFrame, on: list[str], n: int) -> np.ndarray:
    """What Dask's shuffle computes: pandas' hash of the keys, numeric ones as float64."""
    keys = df[on].astype({c: np.float64 for c in on if pd.api.types.is_numeric_dtype(df[c])})
    return (pd.util.hash_pandas_object(keys, index=False).to_numpy() % N).astype(np.int16)


@pytest.mark.parametrize(
    "columns",
    [
        {"k": np.array([3, -1, 0, 2**40, 7, 3], dtype=np.int64)},
        {"k": np.array([0.0, -0.0, np.nan, 1.5, -np.nan, 2.0])},  # canonicalized as pandas does
        {"k": np.array([1, 2, 3, 4, 5, 250], dtype=np.uint8)},
        {"k": np.array([True, False, True, True, False, False])},
        {"k": np.arange(6, dtype=np.int32), "j": np.linspace(0, 1, 6)},  # two keys combined
        {"k": ["a", "b", "a", None, "c", "d"]},  # not numeric: through pandas
    ],
)
def test_keys_land_in_the_partitions_dasks_rule_gives(columns):
    df = pd.DataFrame(columns)
    on = list(columns)
    table = pa.Table.from_pandas(df, preserve_index=False)
    assert (partition_ids(table, on, N) == dask_rule(df, on, N)).all()


def test_int_keys_with_nulls_hash_as_pandas_sees_them():
    table = pa.table({"k": pa.array([1, None, 3, 4], pa.int64())})
    df = table.to_pandas()  # float64 with NaN
    assert (partition_ids(table, ["k"], N) == dask_rule(df, ["k"], N)).all()


def roundtrip(table: pa.Table, on: list[str]) -> tuple[list[pa.RecordBatch], pa.Table]:
    parts = split_batches(table, on, N)
    payloads = encode_blocks(parts)
    blocks = [Block(0, r, p) for r, p in enumerate(payloads) if len(p)]
    return parts, decode_blocks(blocks, table.schema)


def test_split_keeps_every_row_once_in_its_partition_and_in_input_order():
    rng = np.random.default_rng(1)
    table = pa.Table.from_batches(  # two chunks: the split makes one batch of them
        [pa.table({"k": rng.integers(0, 50, 300), "row": np.arange(300)}).to_batches()[0]] * 2
    )
    parts, back = roundtrip(table, ["k"])
    ids = partition_ids(table, ["k"], N)
    for r, part in enumerate(parts):
        rows = part.column("row").to_numpy()
        assert list(rows) == [i % 300 for i in np.flatnonzero(ids == r)]  # stable order
    assert sorted(back.column("row").to_pylist()) == sorted(table.column("row").to_pylist())
    assert back.schema == table.schema


def test_blocks_carry_no_schema_but_decode_with_the_maps_one():
    df = pd.DataFrame({"k": np.arange(40), "v": np.linspace(0, 1, 40)}, index=np.arange(40) * 3)
    table = pa.Table.from_pandas(df, preserve_index=True)
    parts = split_batches(table, ["k"], N)
    payloads = encode_blocks(parts)
    assert all(b"pandas" not in bytes(p) for p in payloads)  # no schema, no metadata
    back = to_pandas(decode_blocks([Block(0, r, p) for r, p in enumerate(payloads)], table.schema))
    assert back.sort_index().equals(df)  # the index labels come back from the metadata


def test_dictionary_columns_travel_with_their_dictionaries():
    table = pa.table({"k": [1, 2, 3, 4], "c": pa.array(["x", "y", "x", "z"]).dictionary_encode()})
    _, back = roundtrip(table, ["k"])
    assert sorted(back.column("c").to_pylist()) == ["x", "x", "y", "z"]


def test_maps_that_disagree_on_the_schema_are_refused_and_an_empty_map_is_not_asked():
    ints = pa.schema([("k", pa.int64())])
    floats = pa.schema([("k", pa.float64())])
    nulls = pa.schema([("k", pa.null())])  # e.g. an empty pandas partition's object column
    assert shuffle_schema([(nulls, False), (ints, True), (ints, True)]) == ints
    with pytest.raises(EngineError, match="disagree"):
        shuffle_schema([(ints, True), (floats, True)])
    assert shuffle_schema([(nulls, False)]) == nulls


def test_whether_glibc_reuses_freed_buffers_is_told_from_the_environment():
    assert glibc_reuses_buffers({})
    assert not glibc_reuses_buffers({"MALLOC_TRIM_THRESHOLD_": "65536"})  # Dask's workers
    assert not glibc_reuses_buffers({"MALLOC_MMAP_THRESHOLD_": "131072"})
    assert not glibc_reuses_buffers({"GLIBC_TUNABLES": "glibc.malloc.top_pad=0"})
    assert glibc_reuses_buffers({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})  # not a threshold


@pytest.mark.skipif(not glibc_reuses_buffers(), reason="glibc's thresholds fixed here")
def test_a_tasks_buffers_come_from_the_c_allocator_that_keeps_freed_memory():
    """The ordered rows, the encoded blocks and the reduce's pandas columns are allocated by
    the system pool (glibc keeps memory a task freed for the next; Arrow's default pool gives
    it back to the system at once, and every task then faults its pages in again)."""
    values = {c: np.random.random(50_000) for c in "vwx"}
    table = pa.table({"k": np.arange(50_000, dtype=np.int64), **values})
    system, default = pa.system_memory_pool(), pa.default_memory_pool()
    before_system, before_default = system.bytes_allocated(), default.bytes_allocated()
    blocks = encode_blocks(split_batches(table, ["k"], N))
    encoded = sum(len(b) for b in blocks)
    assert system.bytes_allocated() - before_system >= encoded
    assert default.bytes_allocated() - before_default < encoded // 10
    decoded = decode_blocks([Block(i, 0, bytes(b)) for i, b in enumerate(blocks)], table.schema)
    before_frame = system.bytes_allocated()
    frame = to_pandas(decoded)
    assert system.bytes_allocated() - before_frame >= 4 * 8 * 50_000  # its four columns
    assert len(frame) == 50_000 and frame["k"].sort_values().tolist() == list(range(50_000))


def test_a_reduces_frame_comes_from_the_c_allocator_where_tasks_use_arrows_pool(monkeypatch):
    """Where glibc's thresholds are fixed (Dask's workers) a task's passing buffers come from
    Arrow's default pool, but the reduce's pandas columns, which the caller keeps, still come
    from the system pool: each its own mapping in small pages, not carved from huge pages
    that the kernel zeroes whole on first touch."""
    import dataferry.engine.shuffle.codec as codec

    monkeypatch.setattr(codec, "POOL", pa.default_memory_pool())  # as in a Dask worker
    table = pa.table({c: np.random.random(50_000) for c in "vwx"})
    chunked = pa.concat_tables([table.slice(0, 20_000), table.slice(20_000)])
    system, default = pa.system_memory_pool(), pa.default_memory_pool()
    before_system, before_default = system.bytes_allocated(), default.bytes_allocated()
    frame = to_pandas(chunked)
    assert system.bytes_allocated() - before_system >= 3 * 8 * 50_000  # its three columns
    assert default.bytes_allocated() - before_default < 8 * 50_000
    assert frame["v"].tolist() == table.column("v").to_pylist()
    frame.loc[0, "v"] = -1.0  # the caller's own frame: writable
    assert frame["v"].iloc[0] == -1.0


@pytest.mark.skipif(not glibc_reuses_buffers(), reason="glibc's thresholds fixed here")
def test_buffers_past_glibcs_reuse_limit_stay_in_arrows_default_pool():
    """glibc maps an allocation over 32 MiB afresh every time, so those gain nothing there."""
    assert pool_for(REUSED_UP_TO).backend_name == "system"
    big = pool_for(REUSED_UP_TO + 1)
    assert big.backend_name == pa.default_memory_pool().backend_name


FRAMES = {
    "numbers": pd.DataFrame(
        {
            "k": np.arange(6, dtype=np.int64),
            "x": [0.5, np.nan, 2.0, 3.0, np.inf, -1.0],  # NaN becomes null, as from_pandas does
            "u": np.arange(6, dtype=np.uint16),
            "b": [True, False] * 3,
            "f": np.arange(6, dtype=np.float32),
        }
    ),
    "stepped range index": pd.DataFrame({"a": [1, 2, 3]}, index=pd.RangeIndex(5, 11, 2)),
    "named index": pd.DataFrame({"a": [1, 2, 3]}, index=pd.Index([7, 8, 9], name="k")),
    "sliced": pd.DataFrame({"a": np.arange(10.0), "b": np.arange(10)}).iloc[3:8],
    "no rows": pd.DataFrame({"a": np.array([], dtype=np.int64)}),
    # not taken in place: the general conversion
    "strings": pd.DataFrame({"a": ["x", None, "z"], "b": [1, 2, 3]}),
    "int names": pd.DataFrame({0: [1.0, 2.0], 1: [3, 4]}),
    "index named as a column": pd.DataFrame({"a": [1, 2]}, index=pd.Index([5, 6], name="a")),
    "categories": pd.DataFrame({"a": pd.Categorical(["x", "y"])}),
}


@pytest.mark.parametrize("keep_index", [False, True])
@pytest.mark.parametrize("name", list(FRAMES))
def test_a_frame_converts_as_from_pandas_converts_it(name, keep_index):
    df = FRAMES[name]
    table = from_pandas(df, preserve_index=keep_index)
    expected = pa.Table.from_pandas(df, preserve_index=keep_index)
    assert table.equals(expected, check_metadata=True)
    pd.testing.assert_frame_equal(to_pandas(table), expected.to_pandas())


def test_plain_numeric_frames_skip_pandas_general_conversion(monkeypatch):
    """The general conversion (pyarrow's pandas_compat, some 3 ms a map at 1 GiB) runs only
    for frames that need it; a frame of plain numbers is wrapped column by column."""
    import pyarrow.pandas_compat as compat

    calls = []
    general = compat.dataframe_to_arrays

    def spy(*args, **kwargs):
        calls.append(1)
        return general(*args, **kwargs)

    monkeypatch.setattr(compat, "dataframe_to_arrays", spy)
    df = pd.DataFrame({"a": np.arange(1000.0), "b": np.arange(1000), "c": np.ones(1000)})
    table = from_pandas(df, preserve_index=True)
    assert calls == []
    for name in df.columns:  # and in place: the table's data is the frame's
        data = table.column(name).chunk(0).buffers()[1]
        assert data.address == df[name].to_numpy().ctypes.data, name
    from_pandas(FRAMES["strings"], preserve_index=True)
    assert calls == [1]


@pytest.mark.parametrize(
    "columns",
    [
        {"k": np.array([2**63 + 5, 2**53 + 1, 0, 7], dtype=np.uint64)},  # cast to float64 as Dask
        {"k": np.array([-3, 4, 9, -(2**40)], dtype=np.int64), "j": np.array([1, 0, 1, 1], bool)},
        {"a": np.arange(4, dtype=np.int8), "b": np.arange(4, dtype=np.int16) * 300},
    ],
)
def test_integer_keys_hashed_in_place_land_where_pandas_puts_them(columns):
    """Integer and boolean keys are hashed in this thread's scratch buffers, not by pandas:
    one key or several combined, at a small and a large number of partitions."""
    df = pd.DataFrame(columns)
    on = list(columns)
    table = pa.Table.from_pandas(df, preserve_index=False)
    keys = df[on].astype(np.float64)
    for n in (N, 40_000):  # int16 ids, and int64 ids past int16's range
        expected = pd.util.hash_pandas_object(keys, index=False).to_numpy() % np.uint64(n)
        assert (partition_ids(table, on, n) == expected).all()


def test_hashing_again_leaves_earlier_ids_and_splits_as_they_were():
    """The scratch buffers are reused from one map to the next (a larger map, then a smaller
    one): ids handed out are copies, and a split is made before its ids are overwritten."""
    rng = np.random.default_rng(3)
    big = pa.table({"k": rng.integers(0, 10**9, 5000), "row": np.arange(5000)})
    small = pa.table({"k": rng.integers(0, 10**9, 300), "row": np.arange(300)})
    first = partition_ids(big, ["k"], N)
    kept = first.copy()
    parts_big = split_batches(big, ["k"], N)
    parts_small = split_batches(small, ["k"], N)
    partition_ids(small, ["k"], N)
    assert (first == kept).all()
    for table, parts in ((big, parts_big), (small, parts_small)):
        ids = partition_ids(table, ["k"], N)
        for r, part in enumerate(parts):
            assert part.column("row").to_pylist() == list(np.flatnonzero(ids == r))
