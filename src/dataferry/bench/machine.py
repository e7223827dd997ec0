"""What a benchmark report says about where it ran."""

from __future__ import annotations

import os
import platform
import time
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
