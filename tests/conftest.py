"""Shared fixtures: fresh stores of every kind the contract suite runs on."""

from __future__ import annotations

import uuid

import pytest

from dataferry.store import Store, open_store

STORE_KINDS = ["local", "memory", "sim-hdfs", "sim-gcs", "sim-s3", "faulty-local", "sub-local"]


def make_store(kind: str, tmp_path) -> Store:
    if kind == "local":
        return open_store(str(tmp_path / "store"))
    if kind == "memory":
        return open_store(f"memory://dataferry-tests/{uuid.uuid4().hex}")
    if kind.startswith("sim-"):
        return open_store(f"sim:{kind[4:]}:{tmp_path / 'store'}", latency_scale=0.0)
    if kind == "faulty-local":
        return open_store(str(tmp_path / "store"), faults=[])
    if kind == "sub-local":
        from dataferry.store.substore import SubStore

        return SubStore(open_store(str(tmp_path / "outer")), "a/b/inner")
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
def any_store(request, tmp_path) -> Store:
    return make_store(request.param, tmp_path)


@pytest.fixture
def local_store(tmp_path) -> Store:
    return open_store(str(tmp_path / "dest"))
