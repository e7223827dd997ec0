"""The floor a job commit is set beside in `bench commit`, timed in the same run: the same
number of bare renames on local disk (one after another), or on the server itself (a URL:
as many at once as the job commit's I/O threads) the least a commit must do there: bare
renames where the store renames (an `hdfs://` NameNode), server-side copies and deletes where
a rename is a copy (gs://, abfs:// over the Blob API)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..store import LocalStore, Store


def measure_rename_floor(files: int, file_size: int) -> float:
    """Seconds for `files` bare renames of small files on local disk, one after another."""
    directory = tempfile.mkdtemp(prefix="dataferry-floor-")
    try:
        store = LocalStore(directory)
        payload = b"x" * file_size
        names = [f"f{i:06d}" for i in range(files)]
        for n in names:
            store.write_bytes(f"src/{n}", payload)
        store.mkdirs("dst")
        os.sync()  # as before a job commit (see _run_one)
        start = time.perf_counter()
        for n in names:
            store.rename(f"src/{n}", f"dst/{n}")
        return time.perf_counter() - start
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True)
class StoreFloor:
    seconds: float
    what: str  # "bare renames" or "copies and deletes"


def measure_store_floor(store: Store, files: int, file_size: int, threads: int) -> StoreFloor:
    """The floor on `store` itself (a real server), `threads` at once as a committer's job
    commit sends them: `files` bare renames where the store's renames are atomic, else the
    server-side copy and delete a rename is there. The files are written first, untimed."""
    payload = b"x" * file_size
    names = [f"f{i:06d}" for i in range(files)]
    renames = store.capabilities.atomic_file_rename

    def move(n: str) -> None:
        if renames:
            store.rename(f"src/{n}", f"dst/{n}")
        else:
            store.copy(f"src/{n}", f"dst/{n}")
            store.delete(f"src/{n}")

    store.mkdirs("dst")
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: store.write_bytes(f"src/{n}", payload), names))
        start = time.perf_counter()
        list(pool.map(move, names))
        seconds = time.perf_counter() - start
    store.delete("", recursive=True)
    return StoreFloor(seconds, "bare renames" if renames else "copies and deletes")


def floor_kind(location: str) -> str | None:
    """Where the floor is measured: "local" disk, the "store" itself (a server's URL: s3://,
    hdfs://, gs://, abfs://: there the copies and deletes a copy-based commit would send, or
    its renames), or None for a model (its bound comes from the request count)."""
    if location.startswith("sim:"):
        return None
    if "://" in location and not location.startswith("file://"):
        return "store"
    return "local"
