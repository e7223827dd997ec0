"""What a benchmark report says about where it ran."""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from typing import Any


def machine_info() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def disk_write_mb_s(directory: str, nbytes: int = 256 * 1024 * 1024) -> float:
    """Sequential write bandwidth of the disk under `directory` (written, fsynced, deleted):
    the limit a shuffle that writes its data to disk is compared with."""
    from ..store import LocalStore

    store = LocalStore(directory)
    block = os.urandom(4 * 1024 * 1024)
    started = time.perf_counter()
    with store.open_write("disk-probe.bin") as f:
        for _ in range(max(1, nbytes // len(block))):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - started
    store.delete("disk-probe.bin")
    return (max(1, nbytes // len(block)) * len(block)) / seconds / 1e6


@dataclass(frozen=True)
class DiskFloor:
    """What this machine needs at least to move `nbytes` through its disk once: written and
    made durable (`write_s`, fdatasync included), then read back once (`read_s`)."""

    nbytes: int
    write_s: float
    read_s: float

    @property
    def seconds(self) -> float:
        return self.write_s + self.read_s

    @property
    def write_mb_s(self) -> float:
        return self.nbytes / self.write_s / 1e6 if self.write_s else 0.0


def disk_floor(directory: str, nbytes: int, chunk: int = 4 * 1024 * 1024) -> DiskFloor:
    """Write `nbytes` (random, in `chunk`s) under `directory`, fdatasync them, read them back
    once, and delete the file: the floor a shuffle of `nbytes` through this disk is held to
    (every byte written once and read once, no CPU spent on them)."""
    from ..store import LocalStore

    store = LocalStore(directory)
    block = os.urandom(min(chunk, max(1, nbytes)))
    count = max(1, nbytes // len(block))
    started = time.perf_counter()
    with store.open_write("disk-floor.bin") as f:
        for _ in range(count):
            f.write(block)
        f.flush()
        os.fdatasync(f.fileno())
    written = time.perf_counter() - started
    started = time.perf_counter()
    with store.open_read("disk-floor.bin") as f:
        buffer = bytearray(len(block))
        while f.readinto(buffer):  # type: ignore[attr-defined]
            pass
    read = time.perf_counter() - started
    store.delete("disk-floor.bin")
    return DiskFloor(count * len(block), written, read)


def memory_copy_mb_s(nbytes: int = 64 * 1024 * 1024, repeats: int = 3) -> float:
    """One core's memory bandwidth as a copy between two buffers already touched (the best of
    `repeats`): what an encode or a decode that copies each byte once costs at best."""
    import numpy as np

    src = np.ones(nbytes // 8)
    dst = np.zeros_like(src)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - started)
    return nbytes / best / 1e6
