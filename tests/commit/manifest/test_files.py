"""Task manifest JSON: Hadoop compatibility, round trips and every validation failure."""

from __future__ import annotations

import copy
import json

import pytest

from dataferry.commit.manifest.files import (
    MANIFEST_TYPE,
    DirEntry,
    EntryStatus,
    FileEntry,
    TaskManifest,
    marshal,
)
from dataferry.errors import ValidationError


def hadoop_manifest(root: str) -> dict:
    """A manifest as Hadoop writes it for a local destination (`file:/path` URIs)."""
    ta = f"file:{root}/_temporary/job_1/00/tasks/attempt_202401010000_0001_m_000000_0"
    return {
        "type": MANIFEST_TYPE,
        "version": 1,
        "jobId": "job_1",
        "jobAttemptNumber": 0,
        "taskID": "task_202401010000_0001_m_000000",
        "taskAttemptID": "attempt_202401010000_0001_m_000000_0",
        "taskAttemptDir": ta,
        "files": [
            {
                "s": f"{ta}/year=2024/part-0000.parquet",
                "d": f"file:{root}/year=2024/part-0000.parquet",
                "z": 1234,
                "e": "0x8D1",
            },
            {"s": f"{ta}/a%20b/c", "d": f"file:{root}/a%20b/c", "z": 0},
        ],
        "directories": [
            {"d": f"file:{root}/year=2024", "t": 1, "l": 1},
            {"d": f"file:{root}/a%20b", "t": 7, "l": 1},
        ],
        "extraData": {"k": "v"},
        "iostatistics": {
            "counters": {},
            "gauges": {},
            "minimums": {},
            "maximums": {},
            "meanstatistics": {},
        },
        "someFutureField": True,
    }


def test_loads_a_hadoop_written_manifest(store):
    root = store.full_url()[len("file://") :]
    m = TaskManifest.from_json(hadoop_manifest(root), store, "m.json")
    assert m.files[0] == FileEntry(
        "_temporary/job_1/00/tasks/attempt_202401010000_0001_m_000000_0/year=2024/part-0000.parquet",
        "year=2024/part-0000.parquet",
        1234,
        "0x8D1",
    )
    assert m.files[1].dest == "a b/c" and m.files[1].etag is None
    assert m.directories[0] == DirEntry("year=2024", EntryStatus.NOT_FOUND, 1)
    assert m.directories[1].status == EntryStatus.UNKNOWN  # out-of-range wire value
    assert m.extra_data == {"k": "v"}


def test_round_trip_and_uri_encoding(store):
    m = TaskManifest(
        job_id="j",
        job_attempt_number=0,
        task_id="task_x_0000_m_000000",
        task_attempt_id="attempt_x_0000_m_000000_0",
        task_attempt_dir="_temporary/j/00/tasks/a",
        files=[FileEntry("_temporary/j/00/tasks/a/p=1/x%y z", "p=1/x%y z", 3, "e1")],
        directories=[DirEntry("p=1", EntryStatus.DIR, 1)],
    )
    raw = m.to_bytes(store)
    data = json.loads(raw)
    assert data["files"][0]["d"].endswith("/p=1/x%25y%20z")
    assert set(data) == {
        "type",
        "version",
        "jobId",
        "jobAttemptNumber",
        "taskID",
        "taskAttemptID",
        "taskAttemptDir",
        "files",
        "directories",
        "extraData",
        "iostatistics",
    }
    again = TaskManifest.from_bytes(raw, store, "m")
    assert again.files == m.files and again.directories == m.directories


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(type="other"), "type"),
        (lambda d: d.update(version=2), "version"),
        (lambda d: d.update(extraData={"k": 1}), "extraData"),
        (lambda d: d.update(taskID=""), "taskID"),
        (lambda d: d["files"][0].update(s=""), "files[0]"),
        (lambda d: d["files"][0].update(d=""), "files[0]"),
        (lambda d: d["files"][0].update(z=-1), "files[0]"),
        (lambda d: d["files"][1].update(d=d["files"][0]["d"]), "files[1]"),
        (lambda d: d["directories"][0].update(l=-1), "directories[0]"),
        (lambda d: d["files"][0].update(d="file:/etc/passwd"), "files[0]"),
        (lambda d: d["files"][0].update(d="s3://bucket/key"), "files[0]"),
    ],
)
def test_each_validation_failure_names_the_field(store, mutate, field):
    root = store.full_url()[len("file://") :]
    data = copy.deepcopy(hadoop_manifest(root))
    mutate(data)
    with pytest.raises(ValidationError) as e:
        TaskManifest.from_json(data, store, "dest/m.json")
    assert "dest/m.json" in str(e.value) and field in str(e.value)


def test_not_json(store):
    with pytest.raises(ValidationError, match="not valid JSON"):
        TaskManifest.from_bytes(b"{", store, "m.json")


def test_marshal_is_inside_the_store(store):
    assert marshal(store, "") == "file:" + store.full_url()[len("file://") :]  # Hadoop's file:/
    assert marshal(store, "a b").endswith("/a%20b")
