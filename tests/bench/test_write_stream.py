"""`bench write --stream`'s dataferry writer: full-size files from a stream, and the stream
design's cost in its note. Tiny sizes, in this process, no timing."""

from __future__ import annotations

import pyarrow.dataset as pads

from dataferry.bench.write_stream import StreamShape, _dataferry, stream_cost


def test_the_dataferry_stream_writer_makes_a_file_per_partition_and_says_its_cost(tmp_path):
    shape = StreamShape(batches=6, batch_rows=4_096, partitions=5)
    note = _dataferry(shape, str(tmp_path / "o"), {"max_memory": 1 << 20})
    files = list((tmp_path / "o").rglob("*.parquet"))
    assert len(files) == 5  # all of a partition's rows in one file, whatever max_memory
    assert pads.dataset(str(tmp_path / "o"), partitioning="hive").count_rows() == 6 * 4_096
    assert note.startswith("committer ") and "1 task(s); straight through, no spill" in note


def test_the_cost_is_left_out_for_a_write_without_a_spill():
    assert stream_cost({}) == ""
    stats = {
        "segments": 2,
        "spill_bytes": 3 << 20,
        "spill_write_s": 0.25,
        "spill_read_s": 0.125,
        "producer_wait_s": 1.0,
    }
    assert stream_cost(stats) == (
        "; 2 task(s); spill 3 MiB written 0.25 s, read 0.12 s; producer waited 1.00 s"
    )


def test_a_straight_through_stream_says_it_spilled_nothing():
    """The note of a stream written straight through says so (not "spill 0 MiB")."""
    stats = {"segments": 1, "spilled": False, "spill_bytes": 0, "producer_wait_s": 0.5}
    assert stream_cost(stats) == "; 1 task(s); straight through, no spill; producer waited 0.50 s"


def test_generate_only_writes_nothing_and_is_marked_as_the_floor(tmp_path):
    """The `generate only` row times the stream alone: it must write no file, and be marked
    so that the bench does not read its output back as a writer's."""
    from dataferry.bench.write_stream import STREAM_WRITERS

    floor = STREAM_WRITERS["generate only"]
    assert floor.floor and not any(w.floor for n, w in STREAM_WRITERS.items() if n != floor.name)
    note = floor.write(StreamShape(batches=3, batch_rows=100, partitions=2), str(tmp_path), {})
    assert note.startswith("300 rows") and not list(tmp_path.iterdir())


def test_the_stream_is_derived_from_the_pool_with_distinct_rows_and_buffers_of_its_own(
    monkeypatch,
):
    """Batches come from the pool made in setup (no batch is generated while timed), every
    row is distinct, every run gets the same batches, and no batch shares the pool's memory
    (a writer holding batches pays for them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dataferry.bench import write_stream as ws

    shape = StreamShape(batches=3 * ws.POOL_BATCHES * ws.POOL_BATCHES, batch_rows=64, partitions=4)
    pool = ws.batch_pool(shape.batch_rows, shape.partitions)
    generated = []
    monkeypatch.setattr(ws, "make_batch", lambda *a: generated.append(a))
    stream = list(ws.batches(shape))
    assert not generated
    table = pa.Table.from_batches(stream)
    assert table.num_rows == shape.rows
    assert table.column("order_id").to_pylist() == list(range(shape.rows))
    # a partition's rows of one batch (all but their ids) repeat only every P*P batches
    mixes = ws.POOL_BATCHES * ws.POOL_BATCHES
    day = stream[0].column("day")[0]
    rows_of_day = [
        tuple(map(tuple, b.filter(pc.equal(b.column("day"), day)).to_pydict().values()))[1:]
        for b in stream
    ]
    assert len(set(rows_of_day[:mixes])) == mixes and rows_of_day[mixes:] == rows_of_day[:-mixes]
    assert [b.equals(c) for b, c in zip(stream, ws.batches(shape), strict=True)] == [
        True
    ] * shape.batches
    pooled = {buf.address for b in pool.pool for c in b.columns for buf in c.buffers() if buf}
    assert not pooled & {buf.address for c in stream[1].columns for buf in c.buffers() if buf}
