"""A job directory whose intent record is gone but whose phase marker is still there: debris
when nothing but markers and empty directories are left (a cleanup cut short between deleting
the record and its markers), a lost record when a file is still there to finish."""

from __future__ import annotations

import pytest

from dataferry import open_store
from dataferry.commit.records.intent import DamagedRecord, load_intent

JOB_DIR = "_temporary/0"


@pytest.fixture
def store(tmp_path):
    store = open_store(str(tmp_path))
    store.write_bytes(f"{JOB_DIR}/_commit_intent.json.replaced", b"")
    store.mkdirs(f"{JOB_DIR}/_committing")
    store.mkdirs(f"{JOB_DIR}/_temporary/empty")
    return store


def test_markers_and_empty_directories_are_debris(store):
    assert load_intent(store, JOB_DIR) is None


def test_a_file_left_to_move_means_the_record_was_lost(store):
    store.write_bytes(f"{JOB_DIR}/_committing/task_0/part-0.parquet", b"data")
    with pytest.raises(DamagedRecord, match="is missing"):
        load_intent(store, JOB_DIR)


def test_a_file_beside_the_marker_means_the_record_was_lost(store):
    store.write_bytes(f"{JOB_DIR}/part-0.parquet", b"data")
    with pytest.raises(DamagedRecord, match="is missing"):
        load_intent(store, JOB_DIR)
