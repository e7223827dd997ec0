"""Is a process on this host still running? One answer for every record that names a process.

A claim (`commit/records/hold.py`) and the S3 model's upload claims (`store/sim/uploads.py`) name the
process that holds them by pid and by the kernel's start time of that process, which tells it
apart from a later process that was given the same pid. A zombie (exited, not yet reaped by its
parent) is dead: it can do nothing more, so what it holds can be taken over at once.
"""

from __future__ import annotations

import os
import socket

ZOMBIE = "zombie"


def process_start(pid: int) -> str:
    """The kernel's start time of `pid` (clock ticks since boot, from Linux `/proc`), `ZOMBIE`
    for an exited process not yet reaped, and '' where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return ""
    if not fields:
        return ""
    if fields[0] == b"Z":
        return ZOMBIE
    return fields[19].decode() if len(fields) > 19 else ""


def this_process() -> tuple[str, int, str]:
    """(host, pid, start time) of the calling process, as records name their holder."""
    pid = os.getpid()
    return socket.gethostname(), pid, process_start(pid)


def process_alive(pid: object, start: object = "") -> bool:
    """Whether process `pid` of this host runs and is the one that started at `start` ('' or
    None: not known, any process with that pid counts). A zombie is dead."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, as another user
    now = process_start(pid)
    if now == ZOMBIE:
        return False
    return not start or not now or now == start
