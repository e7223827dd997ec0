from __future__ import annotations

import pytest

from dataferry.commit import prepare_destination
from dataferry.errors import ConfigError, DestinationError
from dataferry.store import open_store


@pytest.fixture
def populated(tmp_path):
    store = open_store(str(tmp_path / "d"))
    store.write_bytes("p=1/old.parquet", b"old")
    store.write_bytes("_SUCCESS", b"")
    store.write_bytes("_temporary/other-job/x", b"in flight")
    return store


def test_error_mode_refuses_and_loses_nothing(populated):
    with pytest.raises(DestinationError, match="committed job's _SUCCESS"):
        prepare_destination(populated, "error")
    assert populated.read_bytes("p=1/old.parquet") == b"old"
    assert populated.exists("_SUCCESS")


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_append_and_overwrite_change_nothing_before_the_job_commits(populated, mode):
    """The mode is applied when the job commits: a job that never gets there (it fails, its
    driver dies) leaves the earlier data set and its _SUCCESS exactly as they were."""
    before = {s.path: populated.read_bytes(s.path) for s in populated.walk("")}
    prepare_destination(populated, mode)
    assert {s.path: populated.read_bytes(s.path) for s in populated.walk("")} == before


def test_missing_destination_is_created_and_bad_mode_named(tmp_path):
    store = open_store(str(tmp_path / "new" / "deep"))
    prepare_destination(store, "error")
    assert store.stat("").is_dir
    with pytest.raises(ConfigError, match="unknown write mode 'upsert'"):
        prepare_destination(store, "upsert")
