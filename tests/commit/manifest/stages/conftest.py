"""A destination store and small stage contexts over it (two I/O threads each)."""

from __future__ import annotations

import pytest

from dataferry.commit.manifest.config import ManifestConfig
from dataferry.commit.protocol import StageContext
from dataferry.stats import IOStatistics
from dataferry.store import IOPool, open_store

from .helpers import LAYOUT


@pytest.fixture
def store(tmp_path):
    return open_store(str(tmp_path / "out"))


@pytest.fixture
def scratch(tmp_path):
    """Where load_manifests streams the job's entries."""
    return open_store(str(tmp_path / "scratch"))


@pytest.fixture
def make_ctx(store):
    """make_ctx(target=store, threads=2, **config): a fresh StageContext (fresh statistics)."""
    made: list[StageContext] = []

    def make(target=None, threads: int = 2, **config) -> StageContext:
        ctx = StageContext(
            store=store if target is None else target,
            stats=IOStatistics(),
            pool=IOPool(threads),
            config=ManifestConfig(**config),
            layout=LAYOUT,
        )
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.close()


@pytest.fixture
def ctx(make_ctx):
    return make_ctx()
