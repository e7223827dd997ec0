"""The floor a job commit is set beside in `bench commit`: the same number of bare renames,
timed in the same run, on local disk (one after another) or on the server itself (an `hdfs://`
NameNode: as many at once as the job commit's I/O threads)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

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


def measure_store_rename_floor(store: Store, files: int, file_size: int, threads: int) -> float:
    """Seconds for `files` bare renames of small files on `store` itself (a real server: HDFS),
    `threads` at once as a committer's job commit sends them; the files are written first."""
    payload = b"x" * file_size
    names = [f"f{i:06d}" for i in range(files)]
    store.mkdirs("dst")
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: store.write_bytes(f"src/{n}", payload), names))
        start = time.perf_counter()
        list(pool.map(lambda n: store.rename(f"src/{n}", f"dst/{n}"), names))
        floor = time.perf_counter() - start
    store.delete("", recursive=True)
    return floor


def floor_kind(location: str) -> str | None:
    """Where the bare-rename floor is measured: "local" disk, the "store" itself (a server's
    URL with renames, e.g. hdfs://), or None for a model or an object store (no renames)."""
    if location.startswith(("sim:", "s3://", "s3a://")):
        return None
    if "://" in location and not location.startswith("file://"):
        return "store"
    return "local"
