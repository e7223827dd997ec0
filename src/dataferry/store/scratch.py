"""Scratch space on local disk, through the Store layer (for spilling large intermediate lists
such as the manifest committer's entry file, so memory does not grow with the job)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from .local.store import LocalStore


@contextmanager
def scratch_store(prefix: str = "dataferry-scratch-") -> Iterator[LocalStore]:
    """A LocalStore on a fresh temporary directory, removed afterwards."""
    directory = tempfile.mkdtemp(prefix=prefix)
    try:
        yield LocalStore(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
