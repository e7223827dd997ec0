"""Marker names no writer makes are refused everywhere, and batches are sized in bytes."""

from __future__ import annotations

import json

import pytest

from dataferry import make_committer
from dataferry.errors import CommitError
from dataferry.markers import BadMarker, check_marker_name, data_path, marker_dir, marker_name
from dataferry.markers.client import MAX_BATCH_BYTES, batch_sizes
from dataferry.store import open_store

REFUSED = [
    ".marker.CREATE",
    "_SUCCESS.marker.CREATE",
    "x.marker.BOGUS",
    "x.marker.create",
    "p=1/.part.marker.CREATE",
    "p=1/_temporary.marker.MERGE",
    "evil.marker.CREATE\n",
    "a\x00b.marker.CREATE",
    "a//b.marker.CREATE",
    "../b.marker.CREATE",
    "/abs.marker.CREATE",
    "a\\b.marker.CREATE",
    "no-marker-at-all",
    "x" * 5000 + ".marker.CREATE",
]


@pytest.mark.parametrize("name", REFUSED)
def test_names_no_writer_makes_are_refused(name):
    with pytest.raises(BadMarker):
        check_marker_name(name)
    with pytest.raises(BadMarker):
        data_path(name)


def test_every_name_a_writer_makes_is_accepted():
    for partition in ("", "p=1", "地域=東京/年=2024", "a b/c%20d"):
        for kind in ("CREATE", "MERGE", "APPEND"):
            name = marker_name(partition, "part-00000-abc.snappy.parquet", kind)
            assert check_marker_name(name) == name
            assert data_path(name).endswith("part-00000-abc.snappy.parquet")


def test_batches_are_sized_in_bytes_as_sent():
    names = [marker_name("地域=" + "東京都" * 40, f"part-{i}.parquet") for i in range(400)]
    sizes = batch_sizes(names)
    assert sum(sizes) == 400 and len(sizes) > 1
    start = 0
    for n in sizes:
        body = json.dumps({"dir": marker_dir("x" * 36), "names": names[start : start + n]})
        assert len(body.encode()) <= MAX_BATCH_BYTES
        start += n
    assert batch_sizes(["a" * 100_000]) == [1]  # a lone large name still goes (and may 413)


def test_a_job_commit_names_a_bad_marker_file(tmp_path):
    """A marker file with an unknown type fails the job commit with a clear error, not a bare
    ValueError, and nothing is committed."""
    store = open_store(str(tmp_path / "out"))
    c = make_committer("direct", store)
    job = c.new_job()
    c.setup_job(job)
    t = job.task(0)
    c.write_file(t, "p=1/part-0.bin", b"x")
    message = c.commit_task(t)
    store.write_bytes(f"{marker_dir(job.job_uuid)}/p=1/stray.bin.marker.BOGUS", b"")
    with pytest.raises(CommitError, match=r"stray\.bin\.marker\.BOGUS") as e:
        c.commit_job(job, [message])
    assert marker_dir(job.job_uuid) in str(e.value)
    assert not store.exists("_SUCCESS")
