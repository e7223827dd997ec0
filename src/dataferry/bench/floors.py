"""The floors `bench commit` sets a committer's job commit beside, measured in the same run:
bare renames on local disk, and on a server whose renames are copies (gs://) the copies and
deletes a copy-based commit cannot do without."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

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


def measure_copy_floor(store: Store, files: int, file_size: int, threads: int) -> float:
    """Seconds for a copy-based commit's bare minimum on an object store without rename:
    `files` server-side copies and deletes (what a rename is there), `threads` at once, as
    many as the committers' job-commit pool. The files are written first, untimed."""
    from ..store import IOPool

    payload = b"x" * file_size
    names = [f"f{i:06d}" for i in range(files)]
    with IOPool(threads) as pool:
        pool.for_each(lambda n: store.write_bytes(f"src/{n}", payload), names)

        def move(n: str) -> None:
            store.copy(f"src/{n}", f"dst/{n}")
            store.delete(f"src/{n}")

        start = time.perf_counter()
        pool.for_each(move, names)
        return time.perf_counter() - start
