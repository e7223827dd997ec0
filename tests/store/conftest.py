"""Fixtures of the store tests."""

from __future__ import annotations

import pytest

from dataferry.store import open_store
from dataferry.store.fsspec.store import FsspecStore
from dataferry.store.local import nofollow

KINDS = ["local", "local-per-component", "fsspec-file", "fsspec-file-per-component", "arrow-local"]


@pytest.fixture(params=KINDS)
def make(request, monkeypatch):
    """A function dir -> store of one kind over that local directory (KINDS: the local store,
    with and without openat2; fsspec's local file system, with and without; pyarrow's)."""
    kind = request.param
    if kind.endswith("-per-component"):  # where the kernel has no openat2
        monkeypatch.setattr(nofollow, "_use_openat2", False)
    if kind.startswith("local"):
        return lambda d: open_store(str(d))
    if kind.startswith("fsspec-file"):
        import fsspec

        return lambda d: FsspecStore(str(d), fs=fsspec.filesystem("file"))
    pafs = pytest.importorskip("pyarrow.fs")
    return lambda d: open_store(str(d), filesystem=pafs.LocalFileSystem())
