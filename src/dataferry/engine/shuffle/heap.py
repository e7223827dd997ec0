"""Freed buffers kept for the next shuffle task in processes told to give memory back at once.

A shuffle task's large buffers (a map's rows in partition order, a reduce's pandas columns)
come from the C allocator so that the next task reuses what the last one freed (see
`codec.POOL`). glibc does that by itself: its mmap and trim thresholds grow with the sizes a
process frees, up to 32 and 64 MiB. Setting either threshold (Dask's nanny starts every worker
with `MALLOC_TRIM_THRESHOLD_=65536`) pins the mmap threshold at 128 KiB instead, so every such
buffer is mapped and faulted in afresh, page by page (a 1 GiB shuffle's map and reduce work:
24 ms with about 6,800 page faults a map, against 14.5 ms and none). `keep_freed_buffers` sets
both thresholds to the values glibc's own adjustment reaches, once per process; a process
keeps at most 64 MiB free at the top of each heap. `DATAFERRY_KEEP_FREED_BUFFERS=0` leaves the
allocator as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # mallopt's parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # where glibc's dynamic trim threshold follows it
OPT_OUT = "DATAFERRY_KEEP_FREED_BUFFERS"

_lock = threading.Lock()
_state: dict[str, bool] = {}  # "kept": whether this process's thresholds were set


def keep_freed_buffers() -> bool:
    """Set this process's glibc thresholds (once); whether they are set. False where the C
    library is not glibc, or the environment opts out."""
    with _lock:
        if "kept" not in _state:
            _state["kept"] = _apply()
        return _state["kept"]


def _apply() -> bool:
    if os.environ.get(OPT_OUT, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS): nothing to set
        return False
    kept = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    log.debug("glibc thresholds for shuffle buffers set: %s", kept)
    return kept
