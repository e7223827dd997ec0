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
    assert note.startswith("committer ") and "1 task(s); spill " in note and "read " in note


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
