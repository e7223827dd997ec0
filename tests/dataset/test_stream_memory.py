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
