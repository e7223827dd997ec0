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


def test_append_keeps_data_and_drops_the_old_record(populated):
    prepare_destination(populated, "append")
    assert populated.exists("p=1/old.parquet") and not populated.exists("_SUCCESS")


def test_overwrite_deletes_data_but_not_jobs_in_flight(populated):
    prepare_destination(populated, "overwrite")
    assert [s.path for s in populated.walk("")] == ["_temporary/other-job/x"]


def test_missing_destination_is_created_and_bad_mode_named(tmp_path):
    store = open_store(str(tmp_path / "new" / "deep"))
    prepare_destination(store, "error")
    assert store.stat("").is_dir
    with pytest.raises(ConfigError, match="unknown write mode 'upsert'"):
        prepare_destination(store, "upsert")
