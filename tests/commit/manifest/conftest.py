"""The manifest tests' destination: a fresh local store."""

from __future__ import annotations

import pytest

from dataferry.store import open_store


@pytest.fixture
def store(tmp_path):
    return open_store(str(tmp_path / "out"))
