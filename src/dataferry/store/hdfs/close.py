"""A written file closed as soon as the NameNode can close it, not half a second later.

Closing a written file asks the NameNode to `complete` it, which it refuses while the file's
last block is not yet reported by the DataNode; the report and the close race each other, and
when the close wins hdfs-native sleeps a fixed 500 ms before asking again (rust/src/file.rs).
On the suite's MiniDFSCluster about half the closes of a small file stall so, and a job commit
waits for each record it writes (the claim, the intent, `_SUCCESS`).

Here the file is written and closed on a thread of its own while the caller watches it. A
close that stalled shows as a file of its whole length that stays open: the last block is
committed, every byte on the DataNode. Once the NameNode has shown the whole length for
`SETTLED_S` with the writer still closing (a close that did not stall is done by then), the
caller asks the NameNode to close the file for its writer (`recover_lease`, HDFS's way to
close a file its writer has not closed), which it does once the block report is in: closed as
by its writer, same bytes, same last block. The writer's own retry of `complete`
then finds the file closed with its block and succeeds (HDFS-3031).

The whole length can also show a moment before the writer's `complete` (when the DataNode's
report came first). Should the caller ask then (a writer held up for longer than `SETTLED_S`
between its last packet and its `complete`), the NameNode recovers the block from the
DataNode, whose replica is whole by then, and closes the file itself (seconds later); the
writer's close fails, and the caller waits for the NameNode's close instead. Either way the
file is checked to hold `len(data)` bytes before the write returns, else the write fails.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

log = logging.getLogger("dataferry.store.hdfs")

# looked at early and often: a stalled close is seen as soon as its length shows, and each
# look is one cheap NameNode call (a file status), against a record close of 10-40 ms
FIRST_LOOK_S = 0.002
WATCH_EVERY_S = 0.002
SETTLED_S = 0.015  # an unstalled close ends within a few ms of its block being committed
RECOVERY_WAIT_S = 120.0  # the NameNode's own recovery of a block: a DataNode heartbeat or more

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """This process's threads for writers (a forked child makes its own)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(os.getpid())
        if pool is None:
            pool = ThreadPoolExecutor(64, thread_name_prefix="dataferry-hdfs-close")
            _POOLS[os.getpid()] = pool
        return pool


class _Watch:
    """What the caller saw of the file: since when it has shown its whole length, and whether
    the NameNode was asked to close it."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.asked = False


def write_closed(client: Any, path: str, data: bytes, options: Any) -> bool:
    """Create `path` (absolute) holding `data` and return once it is closed; True when the
    NameNode closed it for its stalled writer. Raises the writer's error when the write
    failed, and OSError when the file closed holds other than `len(data)` bytes."""
    if not data:  # no block: nothing to report, the close never waits
        with client.create(path, options):
            return False

    closing = threading.Event()

    def write() -> None:
        with client.create(path, options) as f:
            f.write(data)
            closing.set()  # the close follows: last packet, then `complete`

    writer = _pool().submit(write)
    watch = _Watch()
    wait([writer], FIRST_LOOK_S)
    while not writer.done():
        # a large file is not watched while its bytes are still being sent
        if closing.is_set() and _closed_for_writer(client, path, len(data), watch):
            writer.add_done_callback(_late_close)
            _check_size(client, path, len(data))
            return True
        wait([writer], WATCH_EVERY_S)
    error = writer.exception()
    if error is None:
        return False
    if not watch.asked:
        raise error
    log.debug(
        "%s: the writer's close failed after the NameNode was asked to close: %s", path, error
    )
    _wait_closed(client, path)
    _check_size(client, path, len(data))
    return True


def _closed_for_writer(client: Any, path: str, size: int, watch: _Watch) -> bool:
    """Whether the NameNode closed the file at our asking; asked only once it has shown its
    whole length for SETTLED_S."""
    try:
        st = client.get_file_info(path)
    except FileNotFoundError:
        return False
    if st.length != size:
        watch.since = None
        return False
    now = time.monotonic()
    if watch.since is None:
        watch.since = now
    if now - watch.since < SETTLED_S:
        return False
    watch.asked = True
    try:
        return bool(client.recover_lease(path))
    except Exception as e:  # the block not reported yet (AlreadyBeingCreated): ask again
        log.debug("closing %s for its writer: %s", path, e)
        return False


def _wait_closed(client: Any, path: str) -> None:
    """Wait for the NameNode to close the file (its recovery of the last block)."""
    deadline = time.monotonic() + RECOVERY_WAIT_S
    while time.monotonic() < deadline:
        try:
            if client.recover_lease(path):
                return
        except Exception as e:
            log.debug("waiting for %s to close: %s", path, e)
        time.sleep(0.1)
    raise OSError(f"{path}: not closed by the NameNode within {RECOVERY_WAIT_S:.0f} s")


def _check_size(client: Any, path: str, size: int) -> None:
    length = int(client.get_file_info(path).length)
    if length != size:
        raise OSError(f"{path}: closed holding {length} bytes of {size} written")


def _late_close(writer: Future[None]) -> None:
    """The writer's own close, ending after the file was closed for it (or renamed, or
    removed since): what it says is no longer the write's."""
    if writer.exception() is not None:
        log.debug("the writer's own close of a file closed for it: %s", writer.exception())
