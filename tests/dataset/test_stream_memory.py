"""A stream into many partitions keeps its memory bounded: each open partition file holds
small buffers, not a stream buffer of a MiB each (measured as the kernel sees it, VmHWM, in a
fresh process, so that nothing of this test run's own memory is counted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

MiB = 1 << 20
PARTITIONS = 50

# the child: imports, a warm-up write, then a stream of 1.1 MiB of incompressible numbers per
# partition (enough to fill any per-file buffer of a MiB); prints the high-water marks
CHILD = r"""
import json, sys
import numpy as np
import pyarrow as pa
import dataferry

def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

parts, dest = int(sys.argv[1]), sys.argv[2]
rows = 1 << 16  # 1.3 MiB per batch: every batch touches every partition

def batches(n):
    for i in range(n):
        rng = np.random.default_rng(i)
        yield pa.record_batch({
            "k": pa.array(np.arange(rows) % parts).cast(pa.int32()),
            "a": rng.integers(0, 1 << 62, rows),
            "b": rng.integers(0, 1 << 62, rows),
        })

dataferry.write_dataset(batches(2), dest + "/warm", partition_by=["k"], compression="none")
start = hwm()
r = dataferry.write_dataset(
    batches(56), dest + "/o", partition_by=["k"], compression="none", max_memory=8 << 20
)
print(json.dumps({"start": start, "peak": hwm(), "files": r.files, "bytes": r.bytes}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (VmHWM)")
def test_a_stream_into_many_partitions_keeps_small_buffers_per_file(tmp_path):
    """With a MiB of buffer per open file (the local store's stream buffer, before), a stream
    into 50 partitions held 50 MiB more than its rows: a user's stream into many partitions
    would need memory growing with the partitions, past `max_memory`, and could be killed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(PARTITIONS), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["files"] == PARTITIONS
    assert got["bytes"] >= PARTITIONS * MiB  # every file got past a MiB of buffer
    grown = got["peak"] - got["start"]
    # max_memory 8 MiB: the producer's lead (4 MiB), the rows split and held (1 MiB and their
    # copy), 128 KiB of buffers per open file (6 MiB): 14 MiB measured; a MiB per file, 60
    assert grown < 32 * MiB, f"peak grew {grown / MiB:.0f} MiB over the start"


def test_a_round_of_split_rows_is_one_row_group_per_partition(tmp_path, monkeypatch):
    """Split rows are held for a round, then each partition's share is one row group: were
    each split written as it came, a long stream into many partitions would make row groups
    of a few thousand rows, each holding 4 KiB of footer metadata in memory until its file
    closes (50 MiB for 2 GiB into 40 partitions) and encoding more slowly."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    import dataferry
    from dataferry.dataset import task

    monkeypatch.setattr(task, "INBOX_BYTES", 1)  # each batch split as it comes
    batches = [
        pa.record_batch({"k": np.arange(1000) % 4, "v": np.arange(i * 1000, (i + 1) * 1000)})
        for i in range(16)
    ]
    r = dataferry.write_dataset(iter(batches), str(tmp_path / "o"), partition_by=["k"])
    found = sorted((tmp_path / "o").rglob("*.parquet"))
    assert r.files == len(found) == 4
    assert [pq.ParquetFile(f).metadata.num_row_groups for f in found] == [1, 1, 1, 1]
    back = pads.dataset(str(tmp_path / "o"), partitioning="hive").to_table()
    assert sorted(back.column("v").to_pylist()) == list(range(16_000))
