"""The Azurite fixture itself: the server answers, a container is made, adlfs reaches it."""

from __future__ import annotations

import fsspec
import pytest

pytestmark = pytest.mark.xdist_group("azurite")


def test_azurite_serves_a_container_through_adlfs(azurite_url):
    """Broken, every abfs:// test would fail or skip: the server, its connection string and
    adlfs must meet on a fresh container."""
    fs, root = fsspec.core.url_to_fs(azurite_url.url, **azurite_url.storage_options)
    fs.pipe_file(f"{root}/a", b"hello")
    assert fs.cat_file(f"{root}/a") == b"hello"
