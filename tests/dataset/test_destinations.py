"""write_dataset reaches the destinations users name: storage_options, file system objects."""

from __future__ import annotations

import fsspec
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pytest

import dataferry
from dataferry.errors import ConfigError, StoreError
from dataferry.testing import CREDENTIALS

TABLE = pa.table({"k": ["a", "b"] * 500, "v": list(range(1000))})


def test_storage_options_on_s3_against_the_test_server(s3_server, s3_url, monkeypatch):
    # the environment points nowhere: only the options can lead to the server
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    key, secret = CREDENTIALS["AWS_ACCESS_KEY_ID"], CREDENTIALS["AWS_SECRET_ACCESS_KEY"]
    options = {
        "key": key,
        "secret": secret,
        "client_kwargs": {"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"},
    }
    r = dataferry.write_dataset(TABLE, s3_url, partition_by=["k"], storage_options=options)
    assert r.rows == 1000 and r.partitions == 2
    s3 = pafs.S3FileSystem(
        endpoint_override=s3_server.endpoint.split("://", 1)[1],
        scheme="http",
        access_key=key,
        secret_key=secret,
        region="us-east-1",
    )
    back = pads.dataset(s3_url.split("://", 1)[1], filesystem=s3, partitioning="hive").to_table()
    assert sorted(back.column("v").to_pylist()) == list(range(1000))
    assert s3.get_file_info(s3_url.split("://", 1)[1] + "/_SUCCESS").type == pafs.FileType.File


def test_an_fsspec_file_system_object(tmp_path):
    fs = fsspec.filesystem("memory")
    r = dataferry.write_dataset(TABLE, "/ferry-test/out", filesystem=fs, partition_by=["k"])
    assert r.files == 2
    assert fs.exists("/ferry-test/out/_SUCCESS")
    assert len(fs.glob("/ferry-test/out/k=*/*.parquet")) == 2
    fs.rm("/ferry-test", recursive=True)


def test_a_pyarrow_file_system_object(tmp_path):
    r = dataferry.write_dataset(
        TABLE, str(tmp_path / "out"), filesystem=pafs.LocalFileSystem(), partition_by=["k"]
    )
    assert r.rows == 1000
    back = pads.dataset(str(tmp_path / "out"), partitioning="hive").to_table()
    assert sorted(back.column("v").to_pylist()) == list(range(1000))


def test_a_file_system_object_as_the_destination_says_what_to_pass(tmp_path):
    with pytest.raises(ConfigError, match="filesystem="):
        dataferry.write_dataset(TABLE, fsspec.filesystem("memory"))


def test_hdfs_without_a_namenode_is_a_clear_error():
    """hdfs-native retries a refused connection without end: without the check, a write to a
    mistyped NameNode address would hang instead of saying so."""
    from tests.servers import free_port

    with pytest.raises(StoreError, match=r"cannot reach the NameNode of hdfs://127\.0\.0\.1"):
        dataferry.write_dataset(TABLE, f"hdfs://127.0.0.1:{free_port()}/out")
