from __future__ import annotations

import json

import pytest

from dataferry.commit.records.success import SUCCESS_NAME, SuccessData, load_success, read_success
from dataferry.errors import NotFound, ValidationError
from dataferry.store import open_store

# A _SUCCESS in the shape Hadoop's manifest committer writes (fields per ManifestSuccessData).
HADOOP_SUCCESS = {
    "name": SUCCESS_NAME,
    "timestamp": 1700000000000,
    "date": "2023-11-14T22:13:20.000Z[UTC]",
    "hostname": "worker-1",
    "committer": "org.apache.hadoop.mapreduce.lib.output.committer.manifest.ManifestCommitter",
    "description": "Task committer attempt_202311142213_0001_m_000000_0",
    "jobId": "job_202311142213_0001",
    "jobIdSource": "JobID",
    "metrics": {"committer_bytes_committed": 1024, "committer_files_committed": 2},
    "diagnostics": {
        "mapreduce.manifest.committer.io.threads": "32",
        "stage": "committer_commit_job",
    },
    "filenames": ["abfs://c@a.dfs.core.windows.net/out/part-0000", "abfs://c@a/out/part-0001"],
    "iostatistics": {
        "counters": {"op_rename": 2},
        "gauges": {},
        "minimums": {"op_rename.min": 5},
        "maximums": {"op_rename.max": 9},
        "meanstatistics": {"op_rename.mean": {"samples": 2, "sum": 14}},
    },
    "state": "committed",
    "stage": "committer_commit_job",
    "success": True,
    "unknownFutureField": [1, 2, 3],
}


def test_loads_a_hadoop_written_success_and_round_trips(tmp_path):
    store = open_store(str(tmp_path))
    store.write_bytes("_SUCCESS", json.dumps(HADOOP_SUCCESS).encode())
    marker = read_success(store)
    assert not marker.legacy
    data = marker.data
    assert data.job_id == "job_202311142213_0001"
    assert data.metrics["committer_files_committed"] == 2
    again = SuccessData.from_bytes(data.to_bytes())
    assert again.to_json() == data.to_json()
    for key in HADOOP_SUCCESS:
        if key != "unknownFutureField":
            assert key in data.to_json()


def test_legacy_and_missing(tmp_path):
    store = open_store(str(tmp_path))
    assert read_success(store) is None
    store.write_bytes("_SUCCESS", b"")
    assert read_success(store).legacy
    assert load_success(str(tmp_path)).legacy
    assert load_success(str(tmp_path / "_SUCCESS")).legacy
    with pytest.raises(NotFound):
        load_success(str(tmp_path / "nowhere" / "_SUCCESS"))


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"name": "something/else"}, "name"),
        ({"metrics": {"a": "lots"}}, "metrics"),
        ({"filenames": [1]}, "filenames"),
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"success": "yes"}, "success"),
    ],
)
def test_validation_names_the_field(patch, field):
    with pytest.raises(ValidationError, match=field):
        SuccessData.from_json({**HADOOP_SUCCESS, **patch}, "dest/_SUCCESS")


def test_not_json_is_named():
    with pytest.raises(ValidationError, match="dest/_SUCCESS: not valid JSON"):
        SuccessData.from_bytes(b"{nope", "dest/_SUCCESS")


def test_filenames_capped_at_100():
    data = SuccessData(filenames=[f"f{i}" for i in range(250)])
    assert len(data.to_json()["filenames"]) == 100


def test_a_missing_success_names_its_path_in_words(tmp_path):
    """Breaking it: `load_success("/data/out")` on a path that is not there says
    "no out at file:/data" (the last name read as a file name), not what is missing."""
    with pytest.raises(NotFound) as gone:
        load_success(str(tmp_path / "never-written"))
    assert str(gone.value).endswith("never-written: no such file or directory"), gone.value
    (tmp_path / "dest").mkdir()
    with pytest.raises(NotFound) as absent:
        load_success(str(tmp_path / "dest"))
    assert "dest/_SUCCESS: no such file (no job has committed" in str(absent.value)
