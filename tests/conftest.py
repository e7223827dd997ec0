"""Shared fixtures: fresh stores of every kind the contract suite runs on."""

from __future__ import annotations

import uuid

import pytest

from dataferry.store import Store, open_store, registry

pytest_plugins = [
    "tests.servers.azurite",
    "tests.servers.fakegcs",
    "tests.servers.hdfs",
    "tests.servers.iceberg_rest",
    "tests.servers.seaweedfs",
    "tests.servers.spark",
]

# every contract location of every store family in the registry (a store joins the contract
# suite with its row), then the wrappers over the local store
CONTRACT_LOCATIONS = {
    kind: location for spec in registry.KNOWN.values() for kind, location, _ in spec.contract
}
STORE_KINDS = [*CONTRACT_LOCATIONS, "faulty-local", "sub-local"]


@pytest.fixture(scope="session", autouse=True)
def multiprocessing_temp_dir_in_the_system_temp():
    """multiprocessing makes its own temporary directory (its forkserver's socket lives there)
    once per process, under `tempfile.gettempdir()` at that moment. Tests that point
    `tempfile.tempdir` into their tmp_path would otherwise fix it there for the rest of the
    process, and under pytest-xdist that path is too long for a Unix socket."""
    from multiprocessing import util

    util.get_temp_dir()


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-protocol server (moto, in its own process) on a free loopback port, with the
    AWS variables of this process pointed at it."""
    from dataferry.testing import LocalS3Server

    with LocalS3Server() as server, server.exported():
        yield server


@pytest.fixture
def s3_url(s3_server) -> str:
    """A fresh, empty s3:// location on the test server."""
    return f"s3://{s3_server.create_bucket()}/{uuid.uuid4().hex[:8]}"


# contract placeholders (`{s3}` in a registry row's location) -> the fixture giving a fresh
# location on that test server, and the server's fixture whose `storage_options` reach it
# (None: the process's environment does)
SERVER_LOCATIONS = {
    "s3": ("s3_url", None),
    "seaweed": ("seaweed_url", "seaweed"),
    "gcs": ("gcs_url", None),
    "hdfs": ("hdfs_url", None),
    "azurite": ("azurite_url", None),
}


def make_store(kind: str, tmp_path, request=None) -> Store:
    if kind in CONTRACT_LOCATIONS:
        location = CONTRACT_LOCATIONS[kind]
        # a placeholder names the fixture giving a fresh location on its test server, and the
        # one giving the storage options to reach it (if any)
        found, options = {}, {}
        for name, (fixture, server) in SERVER_LOCATIONS.items():
            if "{" + name + "}" in location:
                value = request.getfixturevalue(fixture)
                found[name] = getattr(value, "url", value)  # a URL, or a record holding one
                if server:
                    options = request.getfixturevalue(server).storage_options
        url = location.format(tmp=tmp_path, uuid=uuid.uuid4().hex, **found)
        return open_store(url, latency_scale=0.0, storage_options=options)
    if kind == "faulty-local":
        return open_store(str(tmp_path / "store"), faults=[])
    if kind == "sub-local":
        from dataferry.store.substore import SubStore

        return SubStore(open_store(str(tmp_path / "outer")), "a/b/inner")
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
def any_store(request, tmp_path) -> Store:
    return make_store(request.param, tmp_path, request)


@pytest.fixture
def local_store(tmp_path) -> Store:
    return open_store(str(tmp_path / "dest"))
