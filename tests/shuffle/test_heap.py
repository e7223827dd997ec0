"""A shuffle task's freed buffers stay for the next task even in a process started as Dask
starts its workers (MALLOC_TRIM_THRESHOLD_ set, which pins glibc's mmap threshold): counted in
page faults, in a fresh process each."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dataferry.engine.shuffle import heap

ROUNDS = 30
ALLOCATE_AND_FREE = f"""
ROUNDS = {ROUNDS}
import ctypes, resource, sys
import pyarrow as pa
from dataferry.engine.shuffle.heap import keep_freed_buffers
kept = keep_freed_buffers() if sys.argv[1] == "keep" else None
pool = pa.system_memory_pool()
size = 8 * 2**20
def task():  # a buffer the size of a map's rows, written whole, then freed
    buf = pa.allocate_buffer(size, memory_pool=pool)
    ctypes.memset(buf.address, 1, size)
    del buf
task()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(ROUNDS):
    task()
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")


def faults(mode: str, **env: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", ALLOCATE_AND_FREE, mode],
        env={**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536", **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0], int(out[1])


PAGES = ROUNDS * 8 * 2**20 // 4096  # the pages the rounds write


def test_freed_buffers_are_reused_without_faulting_pages_in_again():
    kept, kept_faults = faults("keep")
    _, plain_faults = faults("plain")
    assert kept == "True"
    assert plain_faults > PAGES // 2  # Dask's setting: every buffer mapped afresh
    assert kept_faults < PAGES // 4  # kept: the same pages again (now and then a refill)


def test_the_environment_can_leave_the_allocator_alone():
    kept, kept_faults = faults("keep", **{heap.OPT_OUT: "0"})
    assert kept == "False" and kept_faults > PAGES // 2
