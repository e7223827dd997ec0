"""A job whose tasks all produced nothing (Spark's zero-partition job) commits, as Hadoop's
FileOutputCommitter and ManifestCommitter commit it: nothing is published and `_SUCCESS` is
written, with an empty file list and zero files committed."""

from __future__ import annotations

import json

import pytest

from dataferry import make_committer
from dataferry.commit.direct.committer import commit_record_path, list_committed
from dataferry.commit.records.success import read_success
from dataferry.commit.registry import KNOWN
from dataferry.store import open_store, paths

UPLOADS = {"magic", "directory", "partitioned"}


def destination(name: str, tmp_path):
    if name in UPLOADS:
        return open_store(f"sim:s3:{tmp_path / 'dest'}", latency_scale=0.0)
    return open_store(str(tmp_path / "dest"))


# blocklist and magic-gcs run only on their servers (Azurite, fake-gcs-server): their empty
# jobs are in the commit contract there (tests/commit/test_contract.py)
SERVER_ONLY = {"blocklist", "magic-gcs"}


@pytest.mark.parametrize(
    "name", sorted(n for n, s in KNOWN.items() if s.family == "files" and n not in SERVER_ONLY)
)
def test_a_job_with_no_committed_task_commits_nothing_but_success(name, tmp_path):
    store = destination(name, tmp_path)
    options = (
        {"staging_dir": str(tmp_path / "staging")} if name in {"directory", "partitioned"} else {}
    )
    if name not in {"v1", "v2"}:
        options["success_data"] = True  # Hadoop's JSON record, to read its file list
    c = make_committer(name, store, **options)
    job = c.new_job()
    c.setup_job(job)
    result = c.commit_job(job, [])
    assert result.files == 0 and result.bytes == 0
    assert [s.path for s in store.walk("") if not paths.is_hidden(s.path)] == []
    marker = read_success(store)
    assert marker is not None
    if name in {"v1", "v2"}:
        assert marker.legacy  # FileOutputCommitter's zero-byte marker, as Hadoop writes it
    else:
        assert marker.data is not None and marker.data.filenames == []
        raw = json.loads(store.read_bytes("_SUCCESS"))
        assert raw["filenames"] == [] and raw["success"] is True
        assert raw["metrics"].get("committer_files_committed", 0) == 0
    # the job leaves nothing of its own behind but the records a reader looks for
    left = sorted(s.path for s in store.walk(""))
    if name == "direct":
        assert left == ["_SUCCESS", commit_record_path(job.job_uuid)]
        assert list_committed(store) == []
    else:
        assert left == ["_SUCCESS"]
    if name in UPLOADS:
        assert store.list_uploads("") == []


def test_the_manifest_success_of_an_empty_job_has_hadoops_fields(tmp_path):
    store = open_store(str(tmp_path / "dest"))
    c = make_committer("manifest", store, success_data=True)
    job = c.new_job()
    c.setup_job(job)
    c.commit_job(job, [])
    raw = json.loads(store.read_bytes("_SUCCESS"))
    assert raw["name"].endswith("SuccessData/1") and raw["committer"].endswith("ManifestCommitter")
    assert raw["metrics"]["committer_files_committed"] == 0
    assert raw["metrics"]["committer_bytes_committed"] == 0
