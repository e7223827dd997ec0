"""The marker service (a real subprocess) keeps every marker directory inside its markers root:
a token holder cannot make it write or delete anywhere else, such as a committed partition."""

from __future__ import annotations

import json
import os
import pathlib
from urllib.parse import quote

import pytest

from dataferry.markers import marker_dir

from .conftest import TOKEN, exchange, http_status, markers_ok, no_unhandled_errors


def name_for(directory: str) -> str:
    """A marker the job of `directory` could make (its data file carries the job's tag), so
    that only the directory decides whether a request is refused."""
    job = directory.replace("\\", "/").rstrip("/").rpartition("/")[2] or "job"
    return f"p=1/a-{job[:8]}-t0-a0.parquet.marker.CREATE"


def post(path: str, body: dict) -> bytes:
    raw = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\n"
        f"Content-Length: {len(raw)}\r\n\r\n"
    ).encode() + raw


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Dataferry-Token: {TOKEN}\r\n\r\n".encode()


def every_request(directory: str) -> list[bytes]:
    q = quote(directory, safe="")
    name = name_for(directory)
    return [
        post("/v1/markers/create", {"dir": directory, "name": name}),
        post("/v1/markers/create_batch", {"dir": directory, "names": [name]}),
        get(f"/v1/markers/exists?dir={q}&name={quote(name, safe='')}"),
        get(f"/v1/markers/all?dir={q}"),
        post("/v1/markers/delete", {"dir": directory}),
    ]


@pytest.fixture
def table(start_service):
    """The service over a table with a committed partition, and links under the markers root
    that lead into it (one absolute, one relative, one in the middle of a path)."""
    markers = start_service("markers")
    root = pathlib.Path(markers.command[1])
    (root / "part=1").mkdir(parents=True)
    (root / "part=1" / "data.parquet").write_bytes(b"committed")
    links = root / "_dataferry" / "markers"
    links.mkdir(parents=True)
    os.symlink(root / "part=1", links / "absolute")
    os.symlink("../../part=1", links / "relative")
    os.symlink(root, links / "up")
    (links / "a-file").write_bytes(b"")
    return markers, root


def assert_partition_intact(root: pathlib.Path) -> None:
    assert sorted(p.name for p in (root / "part=1").iterdir()) == ["data.parquet"]
    assert (root / "part=1" / "data.parquet").read_bytes() == b"committed"


@pytest.mark.parametrize(
    "directory",
    [
        "part=1",  # outside the markers root
        "_dataferry",
        "_dataferry/markers",  # the root itself
        "_dataferry/markers/../../part=1",
        "_dataferry/markers/job/../../../part=1",
        "/part=1",
        "file:///part=1",
        "_dataferry\\markers\\job",
    ],
)
def test_directories_outside_the_markers_root_are_refused(table, directory):
    markers, root = table
    for request in every_request(directory):
        assert http_status(exchange(markers, request)) == 400, (directory, request[:60])
    assert_partition_intact(root)
    markers_ok(markers)
    no_unhandled_errors(markers)


@pytest.mark.parametrize(
    "directory",
    [
        marker_dir("absolute"),
        marker_dir("relative"),
        marker_dir("up") + "/part=1",  # a link in the middle of the path
        marker_dir("a-file"),  # not a directory
    ],
)
def test_links_out_of_the_markers_root_are_refused(table, directory):
    markers, root = table
    for request in every_request(directory):
        assert http_status(exchange(markers, request)) == 400, (directory, request[:60])
    assert_partition_intact(root)
    assert (root / "_dataferry" / "markers" / "absolute").is_symlink()  # not even the link went
    markers_ok(markers)
    no_unhandled_errors(markers)


def test_a_real_marker_directory_is_served(table):
    markers, root = table
    directory = marker_dir("job-1")
    answers = [http_status(exchange(markers, r)) for r in every_request(directory)]
    assert answers == [200] * 5
    assert not (root / directory).exists()  # the last request deleted it
    assert_partition_intact(root)
