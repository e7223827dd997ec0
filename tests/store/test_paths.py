from __future__ import annotations

import pytest

from dataferry.errors import ConfigError
from dataferry.store import paths


def test_normalize():
    assert paths.normalize("a//b/./c/") == "a/b/c"
    assert paths.normalize("") == ""
    for bad in ("..", "a/../b", "/x", "file:///x", "a\\b"):
        with pytest.raises(ConfigError):
            paths.normalize(bad)


def test_helpers():
    assert paths.join("a", "", "b/c") == "a/b/c"
    assert paths.parent("a/b/c") == "a/b" and paths.parent("a") == ""
    assert paths.name("a/b/c") == "c"
    assert paths.is_under("a/b", "a") and not paths.is_under("ab", "a")
    assert paths.relative_to("a/b/c", "a") == "b/c"
    assert paths.depth("a/b") == 2 and paths.depth("") == 0
    assert paths.is_hidden("_temporary/x") and paths.is_hidden("x/.staging/y")
    assert not paths.is_hidden("day=1/part-0.parquet")
